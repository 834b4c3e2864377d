import os
import shutil
import subprocess
import tempfile

BIN = "/app/bin/stats"


def run(binary, data):
    return subprocess.run([binary], input=data, capture_output=True, text=True, timeout=20)


def test_binary_installed():
    assert os.path.isfile(BIN), f"{BIN} is missing"
    assert os.access(BIN, os.X_OK), f"{BIN} is not executable"
    with open(BIN, "rb") as f:
        assert f.read(4) == b"\x7fELF", "the binary must be compiled, not a script"


def test_example_output():
    out = run(BIN, "4 8 15 16 23 42\n")
    assert out.returncode == 0
    assert out.stdout.strip() == "count=6 sum=108 min=4 max=42 mean=18.00"


def test_negative_and_multiline():
    out = run(BIN, "-5\n10 3\n\n-20   7\n")
    assert out.stdout.strip() == "count=5 sum=-5 min=-20 max=10 mean=-1.00"


def test_empty_input():
    out = run(BIN, "")
    assert out.returncode == 0
    assert out.stdout.strip() == "count=0"


def test_source_builds_cleanly():
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        shutil.copytree("/app/src", src)
        subprocess.run(["make", "-C", src, "clean"], capture_output=True, timeout=60)
        build = subprocess.run(["make", "-C", src], capture_output=True, text=True, timeout=60)
        assert build.returncode == 0, build.stderr[-2000:]
        out = run(os.path.join(src, "stats"), "1 2\n")
        assert out.stdout.strip() == "count=2 sum=3 min=1 max=2 mean=1.50"
