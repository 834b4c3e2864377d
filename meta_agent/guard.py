"""The diff guard: checks a proposed harness before any budget is spent on it.

Rejects a revision that writes task ids, distinctive instruction text or test-file strings of
ANY split (test included, without ever showing them to the proposer) into the harness, or that
changes the model knobs when the experiment did not allow it. The proposer returns a Harness
object, so nothing outside the harness can change by construction.
"""

from __future__ import annotations

import hashlib
import re

from benchmarks.task import Task
from task_agent.harness import Harness

SHINGLE = 8  # words: an 8-word run copied from an instruction is not a coincidence
MIN_TEST_LINE = 24  # characters: shorter test lines (imports, asserts on 0) are too generic


class Guard:
    def __init__(self, tasks: list[Task]):
        self.ids = {t.id for t in tasks if len(t.id) >= 6}
        self.shingles: dict[str, str] = {}
        self.test_lines: dict[str, str] = {}
        for t in tasks:
            words = re.findall(r"\w+", t.instruction.lower())
            for i in range(len(words) - SHINGLE + 1):
                self.shingles.setdefault(" ".join(words[i:i + SHINGLE]), t.id)
            for host, _ in t.verifier.files:
                for f in ([host] if host.is_file() else sorted(p for p in host.rglob("*") if p.is_file())):
                    for line in f.read_text(errors="replace").splitlines():
                        line = line.strip()
                        if len(line) >= MIN_TEST_LINE and not line.startswith(("import ", "from ", "#", "def ")):
                            self.test_lines.setdefault(line, t.id)

    def check(self, parent: Harness, child: Harness, *, allow_model_changes: bool = False) -> str | None:
        """None when the child may be evaluated, else the one-line reason it is invalid. Text
        the parent already had is not held against the child."""
        if not allow_model_changes and child.model != parent.model:
            return "model settings changed (model, temperature, reasoning effort, max tokens are frozen; --allow-model-changes)"
        before, after = _text(parent), _text(child)
        for tid in self.ids:
            if tid in after and tid not in before:
                return f"harness mentions a task id ({_hint(tid)})"
        words_after = " ".join(re.findall(r"\w+", after.lower()))
        words_before = " ".join(re.findall(r"\w+", before.lower()))
        for sh, tid in self.shingles.items():
            if sh in words_after and sh not in words_before:
                return f"harness copies instruction text of a task ({_hint(tid)})"
        for line, tid in self.test_lines.items():
            if line in after and line not in before:
                return f"harness copies a line of a task's tests ({_hint(tid)})"
        return None


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
