import os
import subprocess
import tomllib
from pathlib import Path

ROOT = Path("/app/wordstat")
SRC = ROOT / "src"
SAMPLE = ROOT / "sample.txt"
TOP2 = "    4 the\n    3 dog\n"
CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root"}


def run(cmd, env=None, stdin=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd="/tmp",
                          env=env or CLEAN_ENV, input=stdin)


def test_old_module_removed():
    assert not (ROOT / "wordstat.py").exists(), "the old single-file module is still there"
    assert SAMPLE.is_file()


def test_package_files():
    for name in ["__init__.py", "core.py", "cli.py", "__main__.py"]:
        assert (SRC / "wordstat" / name).is_file(), f"src/wordstat/{name} is missing"


def test_pyproject():
    path = ROOT / "pyproject.toml"
    assert path.is_file(), f"{path} is missing"
    data = tomllib.loads(path.read_text())
    assert data["build-system"]["build-backend"] == "setuptools.build_meta"
    assert any(r.replace(" ", "") == "setuptools>=61" for r in data["build-system"]["requires"])
    project = data["project"]
    assert project["name"] == "wordstat" and project["version"] == "0.3.0"
    assert project["requires-python"] == ">=3.9"
    assert project["scripts"] == {"wordstat": "wordstat.cli:main"}
    assert data["tool"]["setuptools"]["packages"]["find"]["where"] == ["src"]


def test_package_imports():
    code = ("import wordstat, wordstat.core, wordstat.cli; "
            "assert wordstat.__version__ == '0.3.0'; "
            "assert wordstat.count_words is wordstat.core.count_words; "
            "assert wordstat.top_words is wordstat.core.top_words; "
            "print(wordstat.__file__); "
            "print(wordstat.top_words('b a b c a b', 2)); "
            "print(wordstat.cli.main(['/app/wordstat/sample.txt', '-n', '1']))")
    out = run(["python3", "-c", code], env={**CLEAN_ENV, "PYTHONPATH": str(SRC)})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == str(SRC / "wordstat" / "__init__.py")
    assert lines[1:] == ["[('b', 3), ('a', 2)]", "    4 the", "0"]


def test_python_m():
    out = run(["python3", "-m", "wordstat", str(SAMPLE), "-n", "2"], env={**CLEAN_ENV, "PYTHONPATH": str(SRC)})
    assert out.returncode == 0, out.stderr
    assert out.stdout == TOP2


def test_launcher_script():
    launcher = ROOT / "bin" / "wordstat"
    assert launcher.is_file() and os.access(launcher, os.X_OK), f"{launcher} is missing or not executable"
    out = run([str(launcher), str(SAMPLE), "-n", "2"])
    assert out.returncode == 0, out.stderr
    assert out.stdout == TOP2


def test_command_on_path():
    link = Path("/usr/local/bin/wordstat")
    assert link.is_symlink(), f"{link} is not a symlink"
    assert os.path.realpath(link) == str(ROOT / "bin" / "wordstat")
    out = run(["wordstat", "--version"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "wordstat 0.3.0"
    out = run(["wordstat", "-", "-n", "2"], stdin="b a b c a b\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "    3 b\n    2 a\n"
