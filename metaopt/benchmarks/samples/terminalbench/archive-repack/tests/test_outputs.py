import hashlib
import tarfile
import zipfile
from pathlib import Path

TARBALL = Path("/app/incoming/inventory-service-1.4.0.tar.gz")
PROJECT = Path("/app/inventory-service-1.4.0")
ZIP = Path("/app/dist/inventory-service-src.zip")
EXPECTED = {
    "README.md",
    "LICENSE",
    "src/inventory/__init__.py",
    "src/inventory/api.py",
    "src/inventory/storage/__init__.py",
    "src/inventory/storage/files.py",
    "src/inventory/storage/migrations.py",
}


def originals():
    with tarfile.open(TARBALL) as tf:
        return {
            m.name.split("/", 1)[1]: tf.extractfile(m).read()
            for m in tf.getmembers()
            if m.isfile() and "/" in m.name
        }


def test_tarball_kept():
    assert TARBALL.is_file()


def test_extracted():
    assert (PROJECT / "README.md").is_file()
    assert (PROJECT / "src/inventory/storage/files.py").is_file()
    assert (PROJECT / "tests/test_api.py").is_file()


def test_zip_members_exact():
    assert ZIP.is_file(), f"{ZIP} is missing"
    with zipfile.ZipFile(ZIP) as zf:
        files = {n for n in zf.namelist() if not n.endswith("/")}
    assert files == EXPECTED


def test_zip_contents_identical():
    orig = originals()
    with zipfile.ZipFile(ZIP) as zf:
        for name in EXPECTED:
            data = zf.read(name)
            assert hashlib.sha256(data).digest() == hashlib.sha256(orig[name]).digest(), name
