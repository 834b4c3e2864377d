import subprocess
import sys

sys.path.insert(0, "/app")

from intervals import merge_intervals  # noqa: E402


def test_basic_overlap():
    assert merge_intervals([(1, 3), (2, 6), (8, 10), (15, 18)]) == [(1, 6), (8, 10), (15, 18)]


def test_unsorted_input():
    assert merge_intervals([(8, 10), (1, 3), (2, 6)]) == [(1, 6), (8, 10)]


def test_touching_intervals_merge():
    assert merge_intervals([(1, 3), (3, 5)]) == [(1, 5)]


def test_contained_interval_keeps_outer_end():
    assert merge_intervals([(1, 10), (2, 3), (4, 5)]) == [(1, 10)]


def test_empty_and_single():
    assert merge_intervals([]) == []
    assert merge_intervals([(4, 4)]) == [(4, 4)]


def test_input_not_modified():
    data = [(5, 7), (1, 2), (2, 4)]
    copy = list(data)
    merge_intervals(data)
    assert data == copy


def test_demo_still_runs():
    out = subprocess.run([sys.executable, "/app/intervals.py"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    assert out.stdout.strip() == "[(1, 6), (8, 10), (15, 18)]"
