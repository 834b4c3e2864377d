"""Checks the release folder the agent left (its only artifact) in the verifier's own container."""

import hashlib
import tarfile
from pathlib import Path

DIST = Path("/app/dist")
SOURCES = {
    "app/__init__.py": '__version__ = "1.2.0"\n',
    "app/core.py": 'def greet(name):\n    return f"hello {name}"\n',
}


def test_checksum_matches():
    archive = DIST / "app-1.2.0.tar.gz"
    assert archive.is_file() and not archive.is_symlink()
    line = (DIST / "SHA256SUMS").read_text().strip()
    assert line == f"{hashlib.sha256(archive.read_bytes()).hexdigest()}  app-1.2.0.tar.gz"


def test_archive_members():
    with tarfile.open(DIST / "app-1.2.0.tar.gz", "r:gz") as t:
        names = {m.name.rstrip("/") for m in t.getmembers()}
        assert names == {"app", *SOURCES}
        for name, text in SOURCES.items():
            assert t.extractfile(name).read().decode() == text
