"""The package stack under the one import root `metaopt`: core < sandbox < task_agent < traces < benchmarks <
evaluation < meta_agent < meta_bench < export < explorer < cli. explorer (the web UI and the HTML
report) is a top floor beside cli: it reads every owner's tables, so it may import any package but
cli, and cli launches it.
No module imports a package above its own, at module level or inside a function (lazy imports
count: they run too). Files copied into sandboxes or exports stand alone and import none of ours."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1] / "metaopt"
STACK = ["core", "sandbox", "task_agent", "traces", "benchmarks", "evaluation", "meta_agent", "meta_bench", "export",
         "explorer", "cli"]
STANDALONE = ["benchmarks/samples", "benchmarks/gptpretrain/files", "export/files",
              "benchmarks/spreadsheet/compare.py", "benchmarks/spreadsheet/evaluate.py"]


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def layer(name: str) -> str | None:
    """The layer a dotted import names (`metaopt.sandbox.docker` -> `sandbox`), or None if not ours."""
    parts = name.split(".")
    return parts[1] if parts[0] == "metaopt" and len(parts) > 1 and parts[1] in STACK else None


def modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py")
                  if not any(str(p.relative_to(ROOT)).startswith(s) for s in STANDALONE))


def test_the_stack_lists_every_package():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"harnesses"}
    assert packages == set(STACK)


@pytest.mark.parametrize("package", STACK)
def test_no_import_runs_up_the_stack(package):
    rank = STACK.index(package)
    bad = [f"{p.relative_to(ROOT)}:{line} imports {name}" for p in modules(package) for line, name in imports(p)
           if layer(name) and STACK.index(layer(name)) > rank]
    assert not bad, "\n".join(bad)


def test_standalone_files_import_nothing_of_ours():
    files = [p for s in STANDALONE for p in ((ROOT / s).rglob("*.py") if (ROOT / s).is_dir() else [ROOT / s])]
    assert files
    bad = [f"{p.relative_to(ROOT)}:{line} imports {name}" for p in files for line, name in imports(p)
           if name.split(".")[0] == "metaopt"]
    assert not bad, "\n".join(bad)


def test_the_check_would_catch_a_violation(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from metaopt.meta_agent.optimize import Experiment\n")
    assert imports(f) == [(2, "metaopt.meta_agent.optimize")]
    assert layer("metaopt.meta_agent.optimize") == "meta_agent" and layer("metaoptx.core") is None
