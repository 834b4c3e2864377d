import sqlite3
from pathlib import Path

OUT = Path("/app/top_customers.txt")
EXPECTED = ["Barbara Liskov|1128.15", "Ada Lovelace|889.68", "Donald Knuth|719.10"]


def test_output_exists():
    assert OUT.is_file(), f"{OUT} is missing"


def test_top_three():
    lines = [ln.strip() for ln in OUT.read_text().strip().splitlines()]
    assert lines == EXPECTED


def test_database_unchanged():
    con = sqlite3.connect("file:/app/shop.db?mode=ro", uri=True)
    try:
        assert con.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 120
        assert con.execute("SELECT COUNT(*) FROM customers").fetchone()[0] == 8
        assert con.execute("SELECT SUM(amount_cents) FROM orders").fetchone()[0] > 0
    finally:
        con.close()
