"""What the diff guard looks for in a proposed harness, beyond copied task content: writes to
the verifier's paths. A harness edit that makes the task agent plant a conftest.py in /tests,
write the reward, add a Python startup hook or put a fake tool on PATH earns score without doing
the task; the trial runner detects that at verify time (the trial is `tampered`), and the guard
refuses it before any budget is spent.

Matching runs on the normalised views of sandbox.tamper_text (case, quotes and concatenation,
separators, base64 / hex / escape runs decoded), so '/te''sts', "L3Rlc3Rz" and $'\\x2ftests' are
the same path.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from metaopt.sandbox.tamper_text import find, views

_PATH_DIR = r"(?<![\w.-])(?:/usr/local/s?bin|/usr/s?bin|/s?bin|(?:~|\$home|\$\{home\}|/root)/\.local/bin)/"
_WRITE = r"(?:>>?|\btee\b(?:\s+-a)?|\b(?:cp|mv|install|ln)\b[^\n;|&]*?|\bopen\(|write_text\(|\bchmod\b[^\n;|&]*?)\s*['\"]?"
LINT = [
    ("the verifier's test directory (/tests)", re.compile(r"(?<![\w./~-])/tests(?![\w.-])")),
    ("the verifier's reward or logs", re.compile(r"/logs/verifier|/logs(?![\w/.-])|\breward\.(?:txt|json)\b")),
    ("pytest configuration or plugins", re.compile(r"conftest\.py|pytest\.ini|\[tool:pytest\]|\[tool\.pytest|pytest_plugins|"
                                                   r"\bpytest11\b|pytest_addopts|pytest_plugins|pytest_runtest_|hookimpl")),
    ("a Python startup hook", re.compile(r"sitecustomize|usercustomize|\.pth\b|pythonstartup")),
    ("the dynamic loader", re.compile(r"ld\.so\.preload|ld_preload|ld\.so\.conf")),
    ("a tool on the verifier's PATH", re.compile(_WRITE + _PATH_DIR)),
    ("installer or git hooks", re.compile(r"apt\.conf\.d|dpkg\.cfg|pre-invoke|post-invoke|core\.fsmonitor|hookspath")),
    ("a fake test summary", re.compile(r"short test summary info")),
]


def verifier_writes(text: str) -> str | None:
    """The first verifier path `text` (a harness's prompts, tool templates and scripts) touches."""
    hit = find(LINT, text)
    return f"{hit[0]} ({hit[1].strip()[:80]!r})" if hit else None


def expected_values(files: list[Path]) -> set[str]:
    """The values the task's Python tests compare against (assert x == "197", assert out in
    ("a", "b")): constants standing directly on a side of a comparison, or in a literal list,
    tuple, set or dict there, or assigned to a name compared against; not the arguments of calls
    (Path("/app/out.txt") is an input)."""
    out: set[str] = set()

    def literals(node: ast.AST) -> list[ast.Constant]:
        if isinstance(node, ast.Constant):
            return [node]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [c for e in node.elts for c in literals(e)]
        if isinstance(node, ast.Dict):
            return [c for e in [*node.keys, *node.values] if e is not None for c in literals(e)]
        return []

    for f in files:
        for p in (sorted(f.rglob("*.py")) if f.is_dir() else [f] if f.suffix == ".py" else []):
            try:
                tree = ast.parse(p.read_text(errors="replace"))
            except (SyntaxError, ValueError, OSError):
                continue
            sides = [side for n in ast.walk(tree) if isinstance(n, ast.Compare) for side in [n.left, *n.comparators]]
            named = {x.id for x in sides if isinstance(x, ast.Name)}  # EXPECTED = [...]; assert got == EXPECTED
            sides += [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
                      and isinstance(n.targets[0], ast.Name) and n.targets[0].id in named]
            for k in (c for side in sides for c in literals(side)):
                if isinstance(k.value, (str, int, float)) and not isinstance(k.value, bool):
                    v = str(k.value).strip()
                    if len(v) >= 3:
                        out.add(v)
    return out


def contains_token(value: str, text_views: list[str]) -> bool:
    """`value` occurs in a view as a whole token (not inside a longer word or number)."""
    pat = re.compile(r"(?<![\w.])" + re.escape(value.lower()) + r"(?![\w])")
    return any(pat.search(v) for v in text_views)


def id_forms(text: str) -> list[str]:
    """Views of `text` with '_' and '.' read as '-', for task id matching."""
    return [re.sub(r"[_.]", "-", v) for v in views(text)]
