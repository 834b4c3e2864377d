import hashlib
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

PROJECT = Path("/app/throttle")
REPORT = Path("/app/reports/junit.xml")
UNCHANGED = {
    "tests/test_backoff.py": "623cb1c2843cc1f27b5b814c5d8239d093d8ae47bb107240ca0080c0d462bb8b",
    "tests/test_bucket.py": "5df22183b75ada154c18a4f953f5cc0f258b3bbcf2172c2fa740953bf6b8093e",
    "pyproject.toml": "e250caa8b77adb876825a62c757f88e6d2e6112c3bef3919695bd08db01729a5",
}
SUITE = {
    "test_initial_burst", "test_refill_after_wait", "test_idle_burst_is_capped", "test_sustained_rate",
    "test_acquire_timeout", "test_acquire_several_tokens", "test_threads_share_the_rate",
    "test_exponential_delays", "test_max_delay_caps_the_wait", "test_gives_up_after_last_attempt",
}


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def throttle():
    sys.path.insert(0, str(PROJECT))
    try:
        import throttle as mod
        yield mod
    finally:
        sys.path.remove(str(PROJECT))


def test_suite_unchanged():
    for rel, digest in UNCHANGED.items():
        assert hashlib.sha256((PROJECT / rel).read_bytes()).hexdigest() == digest, f"{rel} was modified"


def test_idle_bucket_is_capped(throttle):
    clock = FakeClock()
    bucket = throttle.TokenBucket(rate=20, capacity=20, clock=clock, sleep=lambda s: None)
    assert all(bucket.try_acquire() for _ in range(20))
    assert not bucket.try_acquire()
    clock.now += 600
    assert bucket.available() == 20
    assert sum(bucket.try_acquire() for _ in range(25)) == 20


def test_refill_still_works(throttle):
    clock = FakeClock()
    bucket = throttle.TokenBucket(rate=4, capacity=10, clock=clock, sleep=lambda s: None)
    assert sum(bucket.try_acquire() for _ in range(10)) == 10
    clock.now += 0.5
    assert bucket.available() == 2
    clock.now += 0.75
    assert bucket.available() == 5
    assert bucket.try_acquire(5) and not bucket.try_acquire()


def test_junit_report():
    assert REPORT.is_file(), f"{REPORT} is missing"
    root = ET.parse(REPORT).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    assert suites, "no <testsuite> in the report"
    cases = [c for s in suites for c in s.iter("testcase")]
    names = {c.get("name") for c in cases}
    assert names == SUITE, f"report covers {sorted(names)}"
    assert len(cases) == len(SUITE)
    for case in cases:
        bad = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        assert not bad, f"{case.get('name')}: {bad}"
    for s in suites:
        assert int(s.get("failures", 0)) == 0 and int(s.get("errors", 0)) == 0 and int(s.get("skipped", 0)) == 0
