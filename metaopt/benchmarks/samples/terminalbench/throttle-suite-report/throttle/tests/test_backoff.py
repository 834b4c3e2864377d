import time

import pytest

from throttle import GiveUp, retry


class Flaky:
    def __init__(self, failures):
        self.failures = failures
        self.calls = []

    def __call__(self):
        self.calls.append(time.monotonic())
        if len(self.calls) <= self.failures:
            raise ConnectionError("upstream unavailable")
        return "ok"


def gaps(calls):
    return [b - a for a, b in zip(calls, calls[1:])]


def test_exponential_delays():
    fn = Flaky(failures=4)
    assert retry(fn, attempts=5, base_delay=0.25) == "ok"
    for gap, want in zip(gaps(fn.calls), [0.25, 0.5, 1.0, 2.0]):
        assert want - 0.05 <= gap <= want + 1.0, (gap, want)


def test_max_delay_caps_the_wait():
    fn = Flaky(failures=2)
    assert retry(fn, attempts=3, base_delay=1.0, max_delay=1.5) == "ok"
    g = gaps(fn.calls)
    assert 0.95 <= g[0] <= 2.0 and 1.45 <= g[1] <= 2.5, g


def test_gives_up_after_last_attempt():
    fn = Flaky(failures=10)
    with pytest.raises(GiveUp) as info:
        retry(fn, attempts=3, base_delay=0.2)
    assert len(fn.calls) == 3
    assert isinstance(info.value.__cause__, ConnectionError)
