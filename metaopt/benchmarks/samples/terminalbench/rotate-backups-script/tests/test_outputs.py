import os
import subprocess
import tempfile

SCRIPT = "/app/rotate.sh"


def make_dir(names):
    d = tempfile.mkdtemp()
    for name in names:
        path = os.path.join(d, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(name)
    return d


def run(*args):
    return subprocess.run([SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=30)


def test_executable():
    assert os.path.isfile(SCRIPT), f"{SCRIPT} is missing"
    assert os.access(SCRIPT, os.X_OK), f"{SCRIPT} is not executable"


def test_keeps_newest_by_name_date():
    names = ["backup-20241231.tar.gz", "backup-20250301.tar.gz", "backup-20250115.tar.gz",
             "backup-20240601.tar.gz", "backup-20250201.tar.gz"]
    d = make_dir(names)
    # Make modification times disagree with the dates in the names.
    for i, name in enumerate(sorted(names, reverse=True)):
        os.utime(os.path.join(d, name), (1_700_000_000 + i * 1000, 1_700_000_000 + i * 1000))
    out = run(d, 2)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["backup-20240601.tar.gz", "backup-20241231.tar.gz", "backup-20250115.tar.gz"]
    assert sorted(os.listdir(d)) == ["backup-20250201.tar.gz", "backup-20250301.tar.gz"]


def test_other_files_untouched():
    names = ["backup-20250101.tar.gz", "backup-20250102.tar.gz", "backup-latest.tar.gz",
             "notes.txt", "backup-2025010.tar.gz", "sub/backup-20200101.tar.gz", "backup-20250103.tar.gz.part"]
    d = make_dir(names)
    out = run(d, 1)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["backup-20250101.tar.gz"]
    left = sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)
    assert left == sorted(n for n in names if n != "backup-20250101.tar.gz")


def test_keep_more_than_present_and_zero():
    d = make_dir(["backup-20250101.tar.gz", "backup-20250202.tar.gz"])
    out = run(d, 5)
    assert out.returncode == 0 and out.stdout == ""
    assert len(os.listdir(d)) == 2
    out = run(d, 0)
    assert out.returncode == 0
    assert out.stdout.splitlines() == ["backup-20250101.tar.gz", "backup-20250202.tar.gz"]
    assert os.listdir(d) == []


def test_bad_arguments():
    d = make_dir(["backup-20250101.tar.gz"])
    for args in [(), (d,), (d, "abc"), (d, "-1"), ("/nonexistent-dir", 1), (d, 1, "extra")]:
        out = run(*args)
        assert out.returncode == 2, f"args {args}: exit {out.returncode}"
        assert out.stdout == "", f"args {args}: wrote to stdout"
        assert out.stderr.strip(), f"args {args}: no message on stderr"
    assert os.listdir(d) == ["backup-20250101.tar.gz"]
