"""`llm`: a model-driven meta-agent. It reads the raw traces of the parent's failing train trials
through a few read-only tools and writes one revised harness.

    LLMProposer("anthropic/claude-opus-4-1").propose(parent, evidence, tried) -> Revision | None

The meta-agent runs its own small tool-calling loop (not the task agent's, which runs tools in a
sandbox). Its read-only tools and write_revision live in `llm_tools`, which says what each shows
and what a revision must pass; they only ever show the parent's failing *train* trials, so the
sealed test split and the gate's validation trials stay out of reach.

The loop returns None when the model stops without a valid revision or after `max_turns` model
calls. Revision.usd sums the responses' cost_usd (an unknown price counts 0 and is noted in the
rationale and in `last_run`).
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from meta_agent.proposers.base import Evidence, Revision
from meta_agent.proposers.llm_tools import TOOLS, Session
from task_agent.harness import Harness
from task_agent.messages import Message, ModelSettings, ToolResultPart
from task_agent.models import get_model
from task_agent.models.base import Model

PROMPT = Path(__file__).with_name("llm_prompt.md")


class LLMProposer:
    name = "llm"

    def __init__(self, model: str | Model, base_url: str | None = None, *, max_turns: int = 30,
                 max_tokens: int = 16_000, reasoning_effort: str | None = None,
                 max_context_chars: int = 400_000):
        """`model`: `provider/model` (or a Model object). The client is built now, so a missing
        API key (MissingApiKey) or an unknown provider fails here, before any budget is spent."""
        self.model = get_model(model, base_url=base_url) if isinstance(model, str) else model
        self.settings = ModelSettings(model=self.model.name, max_tokens=max_tokens, reasoning_effort=reasoning_effort)
        self.max_turns, self.max_context_chars = max_turns, max_context_chars
        self.spent_usd = 0.0  # across every propose() call, including those that returned None
        self.last_run: dict[str, Any] = {}  # turns, usd, unpriced calls, outcome of the last propose()

    # -- the loop ------------------------------------------------------------------------------------
    def propose(self, parent: Harness, evidence: Evidence, tried: set[str]) -> Revision | None:
        if not evidence.trial_ids:
            self.last_run = {"turns": 0, "usd": 0.0, "unpriced_calls": 0, "outcome": "no evidence"}
            return None
        session = Session(parent, evidence, tried)
        messages = [Message.system(system_prompt()),
                    Message.user(f"The parent harness '{parent.name}' failed {len(evidence.trial_ids)} training "
                                 "trial(s). Diagnose the failures from their raw traces and write one revision.")]
        usd, unpriced, outcome = 0.0, 0, "max_turns"
        for turn in range(1, self.max_turns + 1):
            resp = self.model.generate(messages, TOOLS, self.settings)
            usd += resp.cost_usd or 0.0
            unpriced += resp.cost_usd is None
            messages.append(resp.message)
            calls = resp.message.tool_calls
            if not calls:
                outcome = "stopped without a revision"
                break
            results = [session.call(c) for c in calls]
            if session.revision is not None:
                outcome = "revision"
                break
            left = self.max_turns - turn
            if 0 < left <= 3:  # say so in the last result: a session that ends unwritten is wasted
                last = results[-1]
                results[-1] = last.model_copy(update={"response": last.response + f"\n\n[{left} turn(s) left: "
                                                      "call write_revision before they run out]"})
            messages.append(Message(role="tool", parts=results))
            messages = _fit(messages, self.max_context_chars)
        self.spent_usd += usd
        self.last_run = {"turns": turn, "usd": usd, "unpriced_calls": unpriced, "outcome": outcome,
                         "messages": messages}
        rev = session.revision
        if rev is None:
            return None
        note = f" [meta-agent: {unpriced} model call(s) of unknown price counted as $0]" if unpriced else ""
        return Revision(rev.harness, rev.rationale + note, cites=rev.cites, usd=usd)


ELIDED = "[elided to fit the context window: call the tool again if you need it]"


def _fit(messages: list[Message], max_chars: int) -> list[Message]:
    """Replace the oldest tool results (never the last turn's) by ELIDED until the history fits."""
    total = sum(len(getattr(p, "response", None) or getattr(p, "content", "") or "")
                for m in messages for p in m.parts)
    out = list(messages)
    for i, m in enumerate(out[:-1]):
        if total <= max_chars:
            break
        if m.role != "tool":
            continue
        parts = []
        for p in m.parts:
            if isinstance(p, ToolResultPart) and len(p.response) > len(ELIDED):
                total -= len(p.response) - len(ELIDED)
                p = p.model_copy(update={"response": ELIDED})
            parts.append(p)
        out[i] = Message(role="tool", parts=parts)
    return out


def system_prompt() -> str:
    return (PROMPT.read_text(encoding="utf-8").strip() + "\n\n## Harness format (schema_version 1)\n\n"
            + format_reference())


def format_reference() -> str:
    """Every harness field with its type and docstring, generated from task_agent.harness."""
    lines: list[str] = []
    seen: set[type] = set()

    def walk(model: type[BaseModel], prefix: str) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, f in model.model_fields.items():
            ann = f.annotation
            doc = " ".join((f.description or "").split())
            lines.append(f"- `{prefix}{name}`: {_type_name(ann)}" + (f" — {doc}" if doc else ""))
            inner = _model_in(ann)
            if inner is not None:
                origin = typing.get_origin(_unwrap(ann))
                walk(inner, f"{prefix}{name}" + {list: "[].", dict: ".<name>."}.get(origin, "."))

    walk(Harness, "")
    return "\n".join(lines)


def _unwrap(ann: Any) -> Any:
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        return args[0] if len(args) == 1 else ann
    return ann


def _model_in(ann: Any) -> type[BaseModel] | None:
    ann = _unwrap(ann)
    if typing.get_origin(ann) in (list, dict):
        ann = _unwrap(typing.get_args(ann)[-1])
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def _type_name(ann: Any) -> str:
    text = getattr(ann, "__name__", None) if isinstance(ann, type) else None
    text = text or str(ann).replace("typing.", "").replace("task_agent.harness.", "")
    return re.sub(r"Annotated\[str, StringConstraints\([^)]*\)\]", "name ([a-zA-Z0-9_-]{1,64})", text)
