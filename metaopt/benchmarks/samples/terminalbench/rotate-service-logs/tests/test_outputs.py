import gzip
import hashlib
import os
import stat
from pathlib import Path

LOGS = Path("/var/log/shipd")
STATE = Path("/var/lib/logrotate/shipd.status")

# sha256 of the contents each file had before the rotation (decompressed for .gz files)
BEFORE = {
    "api.log": "0e8a7f18fde2149e9e452111b7c752f6c8a83baaee030b370831fa4e94dfa996",
    "api.log.1": "52c01fe90906c92a5d4f552dca8f38bd3869ca7f7aaaf7db5b82d7b123d8c961",
    "api.log.2.gz": "96fa08d0c0fbd46e9274419c8a229b1bcdc1931b1a07663f70c8257882f6cd4a",
    "api.log.3.gz": "6fdc2e4c23916e7c6cc3b08217a206c6d835fa301f5d3dffe3f386f34bdbad32",
    "worker.log": "c37a10c11911a22b4875f7667b5bb8633c454f7cfa193c4a433fb218846e4432",
    "worker.log.1": "b628d0a41aedc34a64c69e695da2e75f82e84fe162bc70102afecc1673ddcabc",
    "worker.log.2.gz": "306041d35173a46e2fbc65b7c0748f6d18cb4388ea44a26b4ba2d2bbdc90953f",
    "scheduler.log": "1d29c6788e28d53a6226463c8bd282f6ba3c4f9882be669f74f1285ba6935f25",
    "debug.log": "d1aa5c518114c0abe2206498a36f9558257f87e73138574dc441b1cfb3c62ff0",
    "README": "a218ed1c56ffda9b737658be231b4001bad5635c4c6f5cc6f545ff390219893e",
}
# where each old file's contents must be now
MOVED = {
    "api.log": "api.log.1",
    "api.log.1": "api.log.2.gz",
    "api.log.2.gz": "api.log.3.gz",
    "worker.log": "worker.log.1",
    "worker.log.1": "worker.log.2.gz",
    "worker.log.2.gz": "worker.log.3.gz",
    "scheduler.log": "scheduler.log.1",
    "debug.log": "debug.log",
    "README": "README",
}
ROTATED = ["api.log.1", "api.log.2.gz", "api.log.3.gz", "worker.log.1", "worker.log.2.gz",
           "worker.log.3.gz", "scheduler.log.1"]
STATE_TEXT = """logrotate state -- version 2
"/var/log/shipd/api.log" 2025-6-1-3:0:0
"/var/log/shipd/scheduler.log" 2025-6-1-3:0:0
"/var/log/shipd/worker.log" 2025-6-1-3:0:0
"""


def content(name):
    path = LOGS / name
    assert path.is_file(), f"{path} is missing"
    if name.endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            return fh.read()
    return path.read_bytes()


def mode(name):
    return stat.S_IMODE(os.stat(LOGS / name).st_mode)


def test_directory_listing():
    expected = sorted(["api.log", "worker.log", "scheduler.log", "debug.log", "README", *ROTATED])
    assert sorted(os.listdir(LOGS)) == expected


def test_contents_shifted():
    for old, new in MOVED.items():
        assert hashlib.sha256(content(new)).hexdigest() == BEFORE[old], f"{new} should hold what {old} held"


def test_oldest_rotation_dropped():
    dropped = BEFORE["api.log.3.gz"]
    for name in os.listdir(LOGS):
        assert hashlib.sha256(content(name)).hexdigest() != dropped, f"{name} holds the dropped rotation"


def test_current_logs_truncated():
    for name in ["api.log", "worker.log", "scheduler.log"]:
        assert (LOGS / name).stat().st_size == 0, f"{name} was not truncated"
        assert mode(name) == 0o644, f"{name}: {oct(mode(name))}"


def test_compression():
    for name in ROTATED:
        magic = (LOGS / name).read_bytes()[:2]
        assert (magic == b"\x1f\x8b") == name.endswith(".gz"), f"{name} has the wrong compression"


def test_rotated_modes():
    for name in ROTATED:
        assert mode(name) == 0o640, f"{name}: {oct(mode(name))}"


def test_state_file():
    assert STATE.is_file(), f"{STATE} is missing"
    assert STATE.read_text() == STATE_TEXT
