import threading
import time

from throttle import TokenBucket


def drain(bucket):
    while bucket.try_acquire():
        pass


def test_initial_burst():
    bucket = TokenBucket(rate=1, capacity=5)
    assert [bucket.try_acquire() for _ in range(6)] == [True] * 5 + [False]


def test_refill_after_wait():
    bucket = TokenBucket(rate=2, capacity=4)
    drain(bucket)
    time.sleep(1.6)
    assert bucket.available() == 3


def test_idle_burst_is_capped():
    bucket = TokenBucket(rate=5, capacity=3)
    drain(bucket)
    time.sleep(2.0)
    assert bucket.available() == 3
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_sustained_rate():
    bucket = TokenBucket(rate=10, capacity=2)
    start = time.monotonic()
    for _ in range(32):
        assert bucket.acquire()
    elapsed = time.monotonic() - start
    assert 2.8 <= elapsed <= 6.0, elapsed


def test_acquire_timeout():
    bucket = TokenBucket(rate=0.5, capacity=1)
    drain(bucket)
    start = time.monotonic()
    assert bucket.acquire(timeout=1.0) is False
    assert 0.9 <= time.monotonic() - start <= 3.0


def test_acquire_several_tokens():
    bucket = TokenBucket(rate=2, capacity=4)
    drain(bucket)
    start = time.monotonic()
    assert bucket.acquire(3)
    assert 1.4 <= time.monotonic() - start <= 4.0


def test_threads_share_the_rate():
    bucket = TokenBucket(rate=8, capacity=4)
    taken = []

    def worker():
        for _ in range(5):
            bucket.acquire()
            taken.append(time.monotonic())

    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(taken) == 20
    # 4 tokens at once, the other 16 at 8 per second.
    assert 1.9 <= max(taken) - start <= 5.0
