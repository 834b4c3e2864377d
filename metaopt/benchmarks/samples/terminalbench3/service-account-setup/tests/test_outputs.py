"""Reads what the collect hooks snapshotted of the agent's container (its artifacts folder)."""

from pathlib import Path


def test_account():
    fields = Path("/logs/artifacts/passwd.txt").read_text().strip().split(":")
    assert fields[0] == "ingest"
    assert fields[5] == "/srv/ingest"
    assert fields[6] == "/usr/sbin/nologin"
    assert int(fields[2]) < 1000, "a system user has a uid below 1000"


def test_inbox():
    assert Path("/logs/artifacts/inbox.txt").read_text().split() == ["ingest", "ingest", "750"]
