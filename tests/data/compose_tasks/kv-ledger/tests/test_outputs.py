"""The ledger total, in the kv service (queried over the task's network) and in /app/total.txt."""

import urllib.request
from pathlib import Path

KV = "http://kv:8080/keys"
LEDGER = {"ledger/2026-01": "1200", "ledger/2026-02": "-350", "ledger/2026-03": "4075", "ledger/2026-04": "18"}


def get(name):
    return urllib.request.urlopen(f"{KV}/{name}", timeout=10).read().decode()


def test_ledger_entries_untouched():
    for name, value in LEDGER.items():
        assert get(name) == value


def test_total_stored_in_the_service():
    assert get("ledger-total").strip() == "4943"


def test_total_written_to_file():
    assert Path("/app/total.txt").read_text() == "4943\n"
