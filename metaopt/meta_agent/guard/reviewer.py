"""The second line of the harness guard: a model that reads what a revision adds, by meaning.

`Reviewer(model).review(tasks, added)` gives the model the task list (ids and the start of each
instruction) and the added text, and asks whether any of it is specific to one task, citing the
span. Contract:
- a verdict of "specific" counts only with a span found in the added text (whitespace and case
  aside): a model that cites nothing, or text that is not there, has not shown anything;
- a model failure or an answer with no JSON object is an `error`, which the guard treats as a
  refusal (a defence that cannot run fails closed);
- never raises for a model failure.
Scripted reviewers in tests use the package's fake models (`fake/script:PATH`).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from metaopt.benchmarks.task import Task
from metaopt.core.errors import MetaoptError

if TYPE_CHECKING:
    from metaopt.task_agent.models.base import Model

SYSTEM = """You review edits to the harness of an AI agent (its prompts and tool descriptions) before the \
agent is scored on a benchmark. General advice is allowed: how to work, which tools to use, how to \
check results. Anything specific to one of the benchmark's tasks is not allowed: its id or name in \
any spelling, its answer or expected output, a hint that applies only to it, a lookup keyed on its \
words, or its instruction restated. Answer with one JSON object and nothing else:
{"specific": true or false, "task_id": "<the task it targets, or null>", "span": "<exact quote of the added text that is specific, or empty>"}"""

INSTRUCTION_CHARS = 300  # of each task's instruction shown to the reviewer
MAX_ADDED = 6000  # characters of added text shown


@dataclass(frozen=True)
class Review:
    """One verdict, as recorded: which model, whether it found task-specific content, the task it
    named and the span it cited (both checked), its raw answer (clipped), an error when it failed."""

    model: str
    specific: bool
    task_id: str | None = None
    span: str = ""
    raw: str = ""
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def prompt(tasks: list[Task], added: str) -> str:
    lines = ["Tasks of the benchmark:"]
    for t in tasks:
        head = " ".join(t.instruction.split())[:INSTRUCTION_CHARS]
        lines.append(f"- {t.id}: {head}")
    lines += ["", "Text the edit adds to the harness:", "<<<", added[:MAX_ADDED], ">>>"]
    return "\n".join(lines)


class Reviewer:
    def __init__(self, model: str | Model, *, max_tokens: int = 400):
        """`model`: a registered model name (`local/qwen2.5-coder-1.5b`, `fake/script:PATH`, ...) or a Model."""
        from metaopt.task_agent.models import get_model

        self.model = get_model(model) if isinstance(model, str) else model
        self.name = getattr(self.model, "name", str(model))
        self.max_tokens = max_tokens

    def review(self, tasks: list[Task], added: str) -> Review:
        from metaopt.task_agent.messages import Message, ModelSettings

        try:
            resp = self.model.generate([Message.system(SYSTEM), Message.user(prompt(tasks, added))], [],
                                       ModelSettings(model=self.name, max_tokens=self.max_tokens, temperature=0))
            text = resp.message.text or ""
        except MetaoptError as e:
            return Review(self.name, False, error=f"the model failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        return judge(self.name, text, tasks, added)


def judge(model: str, text: str, tasks: list[Task], added: str) -> Review:
    """The Review a model's answer `text` amounts to (see the module docstring's contract)."""
    answer = _json_object(text)
    raw = text[:500]
    if answer is None:
        return Review(model, False, raw=raw, error="the reviewer answered no JSON object")
    specific = answer.get("specific") in (True, "true", "yes")
    span = str(answer.get("span") or "").strip()
    ids = {t.id for t in tasks}
    tid = answer.get("task_id") if answer.get("task_id") in ids else None
    flat = " ".join(added.split()).lower()
    cited = bool(span) and " ".join(span.split()).lower() in flat
    return Review(model, specific and cited, tid, span[:200] if cited else "", raw)


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` (a model may wrap it in prose or a code fence)."""
    dec = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            v, _ = dec.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(v, dict):
            return v
    return None
