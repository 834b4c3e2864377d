"""One import root and a small public API: the distribution installs only `metaopt` (and its console
script), `import metaopt` is cheap, every public name resolves, and hello_world uses nothing else."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def test_the_wheel_installs_only_metaopt(tmp_path):
    src = tmp_path / "src"  # a copy: an in-tree build would leave build/ in the checkout
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".*_cache"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(tmp_path), str(src)], capture_output=True, text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    [wheel] = tmp_path.glob("metaopt-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"metaopt"}, sorted(top)
    meta = next(t for t in top if t.endswith(".dist-info"))
    entry = zipfile.ZipFile(wheel).read(f"{meta}/entry_points.txt").decode()
    assert "metaopt = metaopt.cli:main" in entry and "metaopt.sandbox.inspect_env" in entry
    assert any(n.startswith("metaopt/benchmarks/samples/terminalbench/") for n in names)  # package data
    assert any(n.startswith("metaopt/harnesses/baseline/") for n in names)


def test_import_metaopt_loads_nothing_heavy():
    code = ("import sys, metaopt; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('duckdb', 'docker', 'openai', 'anthropic', 'opentelemetry') or m.startswith('metaopt.')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_every_public_name_resolves_and_unknown_ones_say_so():
    import metaopt

    for name in metaopt.__all__:
        assert getattr(metaopt, name) is not None, name
    assert metaopt.load_harness("minimal").tools
    tasks = metaopt.load_benchmark("terminalbench-sample", tasks=["hello-greetings"])
    assert [t.id for t in tasks] == ["hello-greetings"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        metaopt.nope  # noqa: B018
    with pytest.raises(metaopt.UserError):
        metaopt.load_harness("no-such-harness")


def test_python_m_metaopt_is_the_cli():
    r = subprocess.run([sys.executable, "-m", "metaopt", "benchmarks", "list"], capture_output=True, text=True, check=False,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "terminalbench-sample" in r.stdout


def test_hello_world_uses_only_the_public_api():
    tree = ast.parse((ROOT / "examples" / "hello_world.py").read_text())
    ours = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom | ast.Import)
            for name in ([n.module] if isinstance(n, ast.ImportFrom) else [a.name for a in n.names])
            if name and name.split(".")[0] == "metaopt"]
    assert ours and all(isinstance(n, ast.Import) and [a.name for a in n.names] == ["metaopt"] for n in ours)
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "metaopt"}
    import metaopt

    assert used and used <= set(metaopt.__all__), used - set(metaopt.__all__)
