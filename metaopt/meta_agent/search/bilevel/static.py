"""The validation ladder's first two steps, on the source text alone (nothing runs):

  parse    it compiles; it defines exactly one class `Mechanism` with a valid `name` and every
           required hook (optional ones if present) taking the protocol's arguments
  imports  only allowed modules; no forbidden names (open, exec, eval, __import__, getattr, ...);
           no attribute named __like_this__, no frame/code introspection attributes (f_back,
           gi_frame, tb_frame, co_code, ...), no private attribute (`_x`) of anything but self

Each returns a Step (ok, reason, detail). The same rules are enforced again at run time by the
mechanism host; these checks make the refusal early, cheap and precise.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Literal

from metaopt.meta_agent.search.mechanisms.protocol import (
    ALLOWED_IMPORTS,
    DUNDERS_ALLOWED,
    FORBIDDEN_NAMES,
    NAME,
    OPTIONAL,
    REQUIRED,
)

MAX_CHARS = 30_000
ARITY = {"on_result": 3, "guidance": 1, "select_parent": 2, "filter": 2, "state_dict": 0, "load_state_dict": 1}
INTROSPECTION = frozenset({
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "gi_frame", "gi_code", "cr_frame",
    "cr_code", "ag_frame", "ag_code", "tb_frame", "tb_next", "co_code", "co_consts", "func_globals",
    "with_traceback"})

CheckStep = Literal["parse", "imports", "contract", "dry_run"]
"""The ladder's steps, in order (mechanism_checks.step)."""


@dataclass(frozen=True)
class Step:
    step: CheckStep
    ok: bool
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)


def parse_step(source: str) -> tuple[Step, ast.Module | None]:
    if len(source) > MAX_CHARS:
        return Step("parse", False, f"the module has {len(source)} characters (at most {MAX_CHARS})"), None
    try:
        tree = ast.parse(source)
        compile(tree, "<mechanism>", "exec")
    except SyntaxError as e:
        return Step("parse", False, f"syntax error at line {e.lineno}: {e.msg}", {"line": e.lineno}), None
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Mechanism"]
    if len(classes) != 1:
        return Step("parse", False, f"the module must define exactly one top-level class named Mechanism "
                                    f"(found {len(classes)})"), None
    cls = classes[0]
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    name = _class_name(cls)
    problems = []
    if name is None or not NAME.match(name):
        problems.append(f"Mechanism.name must be a string literal matching {NAME.pattern} (got {name!r})")
    for hook in REQUIRED + OPTIONAL:
        node = methods.get(hook)
        if node is None:
            if hook in REQUIRED:
                problems.append(f"Mechanism has no {hook}() (required hooks: {', '.join(REQUIRED)})")
            continue
        if isinstance(node, ast.AsyncFunctionDef):
            problems.append(f"{hook}() must be a plain method, not async")
            continue
        n_args = len(node.args.posonlyargs) + len(node.args.args) - 1  # minus self
        if n_args != ARITY[hook] or node.args.vararg or node.args.kwonlyargs:
            problems.append(f"{hook}() must take self and exactly {ARITY[hook]} argument(s), takes {n_args}")
    hooks = [h for h in REQUIRED + OPTIONAL if h in methods]
    detail = {"name": name, "hooks": hooks, "functions": defined_functions(tree)}
    if problems:
        return Step("parse", False, "; ".join(problems), detail), None
    return Step("parse", True, f"class Mechanism '{name}' with hooks {', '.join(hooks)}", detail), tree


def imports_step(tree: ast.Module) -> Step:
    problems: list[str] = []
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported.add(alias.name)
                if alias.name not in ALLOWED_IMPORTS and alias.name != "collections.abc":
                    problems.append(f"line {node.lineno}: import {alias.name} is not allowed")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            imported.add(mod)
            if node.level or mod not in ALLOWED_IMPORTS and mod != "collections.abc":
                problems.append(f"line {node.lineno}: from {'.' * node.level}{mod} import ... is not allowed")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            problems.append(f"line {node.lineno}: {node.id} is not allowed")
        elif isinstance(node, ast.Attribute):
            problems += _attribute_problem(node)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in FORBIDDEN_NAMES:
            problems.append(f"line {node.lineno}: defining {node.name} is not allowed")
    if problems:
        head = "; ".join(dict.fromkeys(problems).keys())
        return Step("imports", False, head[:1500], {"imports": sorted(imported), "problems": problems[:50]})
    return Step("imports", True, f"imports {', '.join(sorted(imported)) or 'nothing'}; no forbidden name or attribute",
                {"imports": sorted(imported), "allowed": sorted(ALLOWED_IMPORTS)})


def defined_functions(tree: ast.Module) -> list[str]:
    """Qualified names of the module's top-level functions and of the methods of its top-level
    classes: what must run (through the hooks) for the module to have no dead code."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(node.name)
        elif isinstance(node, ast.ClassDef):
            out += [f"{node.name}.{m.name}" for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return out


def _attribute_problem(node: ast.Attribute) -> list[str]:
    attr = node.attr
    if attr.startswith("__") and attr.endswith("__") and attr not in DUNDERS_ALLOWED:
        return [f"line {node.lineno}: attribute {attr} is not allowed"]
    if attr in INTROSPECTION:
        return [f"line {node.lineno}: attribute {attr} (frame/code introspection) is not allowed"]
    owner = node.value
    if attr.startswith("_") and not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
        return [f"line {node.lineno}: private attribute {attr} of anything but self is not allowed"]
    return []


def _class_name(cls: ast.ClassDef) -> str | None:
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "name" for t in node.targets):
            return node.value.value if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str) else None
    return None
