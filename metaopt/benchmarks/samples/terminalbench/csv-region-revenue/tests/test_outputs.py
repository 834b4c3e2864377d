import re
from pathlib import Path

OUT = Path("/app/region_totals.csv")
EXPECTED = [
    ("south", 2373.38),
    ("north", 1931.53),
    ("west", 1610.44),
    ("central", 1319.30),
    ("east", 1097.00),
]


def _lines():
    assert OUT.is_file(), f"{OUT} is missing"
    text = OUT.read_text()
    assert text.endswith("\n"), "file must end with a newline"
    return text.splitlines()


def test_header():
    assert _lines()[0] == "region,total_revenue"


def test_rows_and_order():
    rows = _lines()[1:]
    assert len(rows) == len(EXPECTED), rows
    for line, (region, total) in zip(rows, EXPECTED):
        name, value = line.split(",")
        assert name == region, f"expected {region} in this position, got {line!r}"
        assert re.fullmatch(r"\d+\.\d\d", value), f"not two decimals: {value!r}"
        assert abs(float(value) - total) < 0.006, f"{region}: {value} != {total:.2f}"


def test_input_untouched():
    data = Path("/app/data/sales.csv").read_bytes()
    assert data.count(b"\n") == 61
    assert data.startswith(b"date,region,product,units,unit_price\n")
