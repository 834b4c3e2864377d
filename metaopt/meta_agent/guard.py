"""The diff guard: checks a proposed harness before any budget is spent on it.

Rejects a revision that writes task ids, distinctive instruction text, test-file lines or the
values the tests expect, of ANY split (test included, without ever showing them to the
proposer), into the harness; that makes the task agent touch the verifier's paths (tests,
reward and logs, pytest configuration, Python startup hooks, the loader, tools on PATH: see
meta_agent.guard_lint); or that changes the model knobs when the experiment did not allow it.
Text is matched after normalisation (case, quotes and concatenation, '_' / '.' / '-' in task
ids, base64 and hex runs decoded), so a task id split in two or encoded is still the task id.
Text the parent already had is not held against the child. The proposer returns a Harness
object, so nothing outside the harness can change by construction.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from metaopt.benchmarks.task import Task
from metaopt.meta_agent.guard_lint import contains_token, expected_values, id_forms, verifier_writes
from metaopt.sandbox.tamper_text import views
from metaopt.task_agent.harness import Harness

SHINGLE = 8  # words: an 8-word run copied from an instruction is not a coincidence
MIN_TEST_LINE = 24  # characters: shorter test lines (imports, asserts on 0) are too generic
DISTINCTIVE = 8  # characters: an expected value this long is matched on its own; shorter ones need context


class Guard:
    def __init__(self, tasks: list[Task]):
        self.ids = {re.sub(r"[_.]", "-", t.id.lower()): t.id for t in tasks if len(t.id) >= 6}
        self.shingles: dict[str, str] = {}
        self.test_lines: dict[str, str] = {}
        self.values: dict[str, set[str]] = {}   # task id -> expected values of its tests
        self.context: dict[str, set[str]] = {}  # task id -> its id and the file names its tests name
        for t in tasks:
            words = re.findall(r"\w+", t.instruction.lower())
            for i in range(len(words) - SHINGLE + 1):
                self.shingles.setdefault(" ".join(words[i:i + SHINGLE]), t.id)
            hosts = [Path(h) for h, _ in t.verifier.files]
            texts = []
            for f in (p for h in hosts for p in ([h] if h.is_file() else sorted(h.rglob("*")) if h.is_dir() else [])):
                if f.is_file() and f.stat().st_size < 1 << 20:
                    texts.append(f.read_text(errors="replace"))
            for text in texts:
                for line in text.splitlines():
                    line = line.strip()
                    if len(line) >= MIN_TEST_LINE and not line.startswith(("import ", "from ", "#", "def ")):
                        self.test_lines.setdefault(line, t.id)
            self.values[t.id] = {v for v in expected_values(hosts) if v.lower() not in _BORING}
            names = {m.lower() for text in texts for m in re.findall(r"[\w.-]+\.(?:txt|csv|json|ya?ml|db|log|py|sh|html|xml)\b", text)}
            self.context[t.id] = {t.id.lower(), *(n for n in names if len(n) >= 6 and not n.startswith("test_"))}

    def check(self, parent: Harness, child: Harness, *, allow_model_changes: bool = False) -> str | None:
        """None when the child may be evaluated, else the one-line reason it is invalid. Text
        the parent already had is not held against the child."""
        if not allow_model_changes and child.model != parent.model:
            return "model settings changed (model, temperature, reasoning effort, max tokens are frozen; --allow-model-changes)"
        before, after = _text(parent), _text(child)
        hack = verifier_writes(after)
        if hack and verifier_writes(before) != hack:
            return f"harness makes the task agent touch {hack}"
        ids_after, ids_before = id_forms(after), id_forms(before)
        sq_after, sq_before = [_squash(v) for v in views(after)], [_squash(v) for v in views(before)]
        lit_after, lit_before = _literals(after), _literals(before)
        for norm, tid in self.ids.items():
            if _has(norm, ids_after) and not _has(norm, ids_before):
                return f"harness mentions a task id ({_hint(tid)})"
            sq = _squash(norm)  # spread out: spaces, camelCase, other separators, pieces joined at run time
            if norm.count("-") >= 2 and len(sq) >= SPREAD_MIN and any(sq in v for v in sq_after) \
                    and not any(sq in v for v in sq_before):
                return f"harness mentions a task id, spread out ({_hint(tid)})"
            if _in_pieces(norm, lit_after) and not _in_pieces(norm, lit_before):
                return f"harness mentions a task id, in pieces ({_hint(tid)})"
        words_after = " ".join(re.findall(r"\w+", after.lower()))
        words_before = " ".join(re.findall(r"\w+", before.lower()))
        for sh, tid in self.shingles.items():
            if sh in words_after and sh not in words_before:
                return f"harness copies instruction text of a task ({_hint(tid)})"
        v_after, v_before = views(after), views(before)
        for line, tid in self.test_lines.items():
            low = line.lower()
            if any(low in v for v in v_after) and not any(low in v for v in v_before):
                return f"harness copies a line of a task's tests ({_hint(tid)})"
        for tid, values in self.values.items():
            new = [v for v in values if contains_token(v, v_after) and not contains_token(v, v_before)]
            if any(len(v) >= DISTINCTIVE for v in new) or (new and any(
                    contains_token(c, v_after) and not contains_token(c, v_before) for c in self.context[tid])):
                return f"harness copies a value a task's tests expect ({_hint(tid)})"
        return None


# Values tests compare against that say nothing about a task: words and numbers any harness uses.
_BORING = {"true", "false", "none", "null", "utf-8", "utf8", "0.0", "1.0", "100", "200", "404", "500", "ok",
           "yes", "passed", "failed", "error", "main", "root", "test", "tests", "__main__", "name", "value",
           "status", "version", "type", "data", "result", "results", "message", "count", "total", "items", "id"}


SPREAD_MIN = 12
"""Letters and digits a task id (of three parts or more) must have to be matched with every
separator removed, on both sides: shorter ones ("fix-c-build") read as ordinary words."""


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _literals(text: str) -> tuple[str, set[str]]:
    """The quoted string literals of `text` (all its views), squashed: joined in order of
    appearance, and as a set. Pieces of an id held in variables or a list show up in both."""
    joined, pieces = [], set()
    for view in {text, *views(text)[:1]}:
        lits = [_squash(a or b or c) for a, b, c in re.findall(r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"|`([^`\n]{1,80})`", view)]
        joined.append("".join(lits))
        pieces |= {x for x in lits if x}
    return " ".join(joined), pieces


def _in_pieces(norm: str, literals: tuple[str, set[str]]) -> bool:
    """A task id (dash-separated) held in quoted pieces: their concatenation in order spells it
    (any case or separator, cut anywhere), or every part of it is a literal of its own, in any
    order. Ids shorter than SPREAD_MIN letters, or with a part under 3, read as ordinary words."""
    joined, pieces = literals
    sq, parts = _squash(norm), [p for p in norm.split("-") if p]
    if len(sq) < SPREAD_MIN:
        return False
    if sq in joined and sq not in pieces:  # one literal holding the whole id is the plain match's business
        return True
    return len(parts) >= 2 and all(len(p) >= 3 for p in parts) and all(_squash(p) in pieces for p in parts)


def _has(needle: str, forms: list[str]) -> bool:
    pat = re.compile(r"(?<![\w-])" + re.escape(needle) + r"(?![\w-])")
    return any(pat.search(f) for f in forms)


def _text(h: Harness) -> str:
    """Every string in the harness, as written (JSON escaping would hide quoted test lines)."""
    out: list[str] = []

    def walk(v: object) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(h.model_dump(mode="json"))
    return "\n".join(out)


def _hint(task_id: str) -> str:
    # Name no test-split task to the proposer: a hash-like hint is enough for the ledger reader.
    return f"task #{hashlib.sha1(task_id.encode()).hexdigest()[:6]}"
