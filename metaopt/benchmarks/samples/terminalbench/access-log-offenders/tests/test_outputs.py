from pathlib import Path

REPORT = Path("/app/report")
EXPECTED_TOP = [
    "51 192.0.2.44",
    "50 203.0.113.7",
    "45 198.51.100.23",
    "30 10.0.1.25",
    "27 10.0.0.2",
]


def test_top_offenders():
    path = REPORT / "top_offenders.txt"
    assert path.is_file(), f"{path} is missing"
    lines = [ln.strip() for ln in path.read_text().strip().splitlines()]
    assert lines == EXPECTED_TOP


def test_not_found_count():
    path = REPORT / "not_found.txt"
    assert path.is_file(), f"{path} is missing"
    assert path.read_text().strip() == "197"


def test_log_untouched():
    lines = Path("/app/logs/access.log").read_text().splitlines()
    assert len(lines) == 800
