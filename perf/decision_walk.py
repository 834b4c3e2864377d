"""How many project files one keep/reject decision walks: the module of the loop's decision
function and every project module its imports reach, followed transitively.

    python -m perf.decision_walk                                   # metaopt.meta_agent.judge
    python -m perf.decision_walk metaopt.meta_agent.optimize -v    # another start (before the split:
                                                                   # Experiment._judge lived there)
    python -m perf.decision_walk metaopt.meta_agent.judge metaopt.meta_agent.evaluator   # the union

Measured when the decision path was split (issue 23): before, Experiment._judge in optimize.py
walked 62 files; after, judge() walks 9 (the statistics: gate, sequential, error_control,
task_order, memory, predictions); the Evaluator it is handed, which runs the trials, is a seam
whose own walk is the trial machinery (evaluation, sandbox, task_agent, traces).

Counted from the source alone (ast): module-level imports of `metaopt.*`, including a package's
`__init__.py` on the way to a submodule; imports under `if TYPE_CHECKING:` (annotations only) and
inside functions (run only when that function is called, not by the decision) are not followed.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "metaopt"


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """Statements run at import: the module body, into if/try blocks, never TYPE_CHECKING ones."""
    out: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        s = todo.pop(0)
        if isinstance(s, ast.If):
            if "TYPE_CHECKING" in ast.unparse(s.test):
                todo[:0] = s.orelse
                continue
            todo[:0] = [*s.body, *s.orelse]
        elif isinstance(s, ast.Try):
            todo[:0] = [*s.body, *s.orelse, *s.finalbody, *(x for h in s.handlers for x in h.body)]
        else:
            out.append(s)
    return out


def imports(name: str) -> set[str]:
    """Project modules `name` imports when it is imported (each with the packages above it)."""
    f = module_file(name)
    if f is None:
        return set()
    is_pkg = f.name == "__init__.py"
    found: set[str] = set()
    for s in _top_level(ast.parse(f.read_text())):
        targets: list[str] = []
        if isinstance(s, ast.Import):
            targets = [a.name for a in s.names]
        elif isinstance(s, ast.ImportFrom):
            base = s.module or ""
            if s.level:  # relative: from the package this module is in
                parts = name.split(".")[: len(name.split(".")) - s.level + (1 if is_pkg else 0)]
                base = ".".join([*parts, base] if base else parts)
            targets = [base, *(f"{base}.{a.name}" for a in s.names)]
        for t in targets:
            if t.split(".")[0] != PACKAGE or module_file(t) is None:
                continue
            parts = t.split(".")
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1) if module_file(".".join(parts[:i])))
    return found


def walk(*starts: str) -> list[str]:
    seen, todo = set(starts), list(starts)
    while todo:
        for m in imports(todo.pop()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return sorted(seen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("start", nargs="*", default=["metaopt.meta_agent.judge"])
    ap.add_argument("-v", "--verbose", action="store_true", help="list the files")
    a = ap.parse_args()
    files = walk(*a.start)
    if a.verbose:
        for m in files:
            print(module_file(m).relative_to(ROOT))  # type: ignore[union-attr]
    print(f"{' + '.join(a.start)}: one decision walks {len(files)} files")


if __name__ == "__main__":
    main()
