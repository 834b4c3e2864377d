"""How many project files one keep/reject decision walks, and the import circles of the package.

    python -m perf.decision_walk                                   # metaopt.meta_agent.judge
    python -m perf.decision_walk metaopt.meta_agent.optimize -v    # another start, with its files
    python -m perf.decision_walk metaopt.meta_agent.judge metaopt.meta_agent.evaluator   # the union
    python -m perf.decision_walk --circles                         # every import circle in metaopt/

A walk is the start's module and every project module its imports reach, followed transitively:
module-level imports of `metaopt.*` (with each package's `__init__.py` on the way to a submodule)
and imports under `if TYPE_CHECKING:` (the types a module's annotations name are part of what a
reader must hold in their head); imports inside functions run only when the function is called,
not by the decision, and are not followed (`--runtime`: TYPE_CHECKING imports not followed either,
the count before issue 42).

Measured: when the decision path was split (issue 23), Experiment._judge in optimize.py walked 62
files and judge() 9 without its type-only imports, 62 with them (its annotations named the concrete
Evaluator); after issue 42 (judge depends on a narrow Evaluator protocol, its records in
meta_agent.outcomes) judge() walks 14 with them.

A circle is a cycle of imports between modules of metaopt/, counting every kind: module level,
type-only and inside functions (a lazy import hides a circle from the interpreter, not from a
reader); a submodule's import of a package it is inside is not an edge (that package is already
being imported). tests/test_import_cycles.py fails on any.
"""

from __future__ import annotations

import argparse
import ast
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "metaopt"
STANDALONE = ("metaopt.benchmarks.samples", "metaopt.benchmarks.gptpretrain.files", "metaopt.export.files")
"""Folders of files copied into sandboxes or exports: they import none of ours (tests/test_layers.py)."""


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _statements(tree: ast.Module, type_only: bool, lazy: bool) -> list[ast.stmt]:
    """The import statements to follow: the module body, into if/try blocks; TYPE_CHECKING blocks
    when `type_only`; function and class bodies when `lazy`."""
    out: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        s = todo.pop(0)
        if isinstance(s, ast.If):
            if "TYPE_CHECKING" in ast.unparse(s.test):
                todo[:0] = [*(s.body if type_only else []), *s.orelse]
                continue
            todo[:0] = [*s.body, *s.orelse]
        elif isinstance(s, ast.Try):
            todo[:0] = [*s.body, *s.orelse, *s.finalbody, *(x for h in s.handlers for x in h.body)]
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if lazy:
                out += [n for n in ast.walk(s) if isinstance(n, (ast.Import, ast.ImportFrom))]
            elif isinstance(s, ast.ClassDef):  # a class body runs at import
                todo[:0] = s.body
        else:
            out.append(s)
    return out


def imports(name: str, *, type_only: bool = True, lazy: bool = False, ancestors: bool = True) -> set[str]:
    """Project modules `name` imports (each with the packages above it; with `ancestors=False`,
    not the packages `name` itself is inside)."""
    named, passed = _imports(name, type_only, lazy, ancestors)
    return named | passed


def _imports(name: str, type_only: bool, lazy: bool, ancestors: bool) -> tuple[set[str], set[str]]:
    """(modules `name` imports for their names, packages it only passes through on the way to a submodule)."""
    f = module_file(name)
    if f is None:
        return set(), set()
    is_pkg = f.name == "__init__.py"
    found: set[str] = set()
    named: set[str] = set()
    for s in _statements(ast.parse(f.read_text()), type_only, lazy):
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
            if ancestors or not name.startswith(t + "."):
                named.add(t)
            found.update(m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1))
                         if module_file(m) and (ancestors or not (name == m or name.startswith(m + "."))))
    found.discard(name)
    named &= found
    return named, found - named


def walk(*starts: str, type_only: bool = True) -> list[str]:
    """The starts and what their imports reach. A package only passed through on the way to a
    submodule (`metaopt/__init__.py` for every module) counts with its module-level imports alone:
    the names its TYPE_CHECKING block types are its own users' business, not this walk's."""
    full: set[str] = set(starts)
    seen: set[str] = set(starts)
    todo = [(m, True) for m in starts]
    while todo:
        m, whole = todo.pop()
        named, passed = _imports(m, type_only and whole, False, True)
        for n, w in [*((n, True) for n in named), *((n, False) for n in passed)]:
            if n not in seen or (w and n not in full):
                seen.add(n)
                if w:
                    full.add(n)
                todo.append((n, w))
    return sorted(seen)


def modules() -> list[str]:
    """Every module of the package but the standalone files."""
    out = []
    for f in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if not any(name == s or name.startswith(s + ".") for s in STANDALONE):
            out.append(name)
    return out


def graph() -> dict[str, set[str]]:
    """module -> the project modules it imports, every kind (module level, type-only, in functions)."""
    return {m: imports(m, type_only=True, lazy=True, ancestors=False) for m in modules()}


def circles(g: dict[str, set[str]] | None = None) -> list[list[str]]:
    """One shortest cycle per strongly connected group of modules (`[a, b, a]`), sorted."""
    g = graph() if g is None else g
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(g):  # Tarjan, iteratively: no recursion limit on a deep package
        if root in index:
            continue
        work = [(root, iter(sorted(g.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.add(w)
                    if w == v:
                        break
                if len(group) > 1:
                    groups.append(group)
    return sorted(_shortest_cycle(g, grp) for grp in groups)


def _shortest_cycle(g: dict[str, set[str]], group: set[str]) -> list[str]:
    start = min(group)
    prev: dict[str, str] = {}
    todo = deque([start])
    while todo:
        v = todo.popleft()
        for w in sorted(g[v] & group):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return [*reversed(path), start]
            if w not in prev:
                prev[w] = v
                todo.append(w)
    raise AssertionError(f"no cycle in {sorted(group)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("start", nargs="*", default=["metaopt.meta_agent.judge"])
    ap.add_argument("-v", "--verbose", action="store_true", help="list the files")
    ap.add_argument("--runtime", action="store_true", help="do not follow TYPE_CHECKING imports")
    ap.add_argument("--circles", action="store_true", help="print the import circles of metaopt/ instead")
    a = ap.parse_args()
    if a.circles:
        found = circles()
        for c in found:
            print(" -> ".join(c))
        print(f"{len(found)} import circle(s) in {PACKAGE}/")
        return
    files = walk(*a.start, type_only=not a.runtime)
    if a.verbose:
        for m in files:
            print(module_file(m).relative_to(ROOT))  # type: ignore[union-attr]
    kind = "module-level imports" if a.runtime else "module-level and type-only imports"
    print(f"{' + '.join(a.start)}: one decision walks {len(files)} files ({kind})")


if __name__ == "__main__":
    main()
