"""`placebo`: the negative control. Each proposal appends one neutral sentence to the system
prompt, a different one each time: the revision is valid, runs, and shows in the traces, but it
carries no instruction, so it cannot make a task model better. Under `--model fake/flaky:P`
(which ignores the harness) every acceptance is a false discovery: run it to see what the gate
lets through on noise alone.
"""

from __future__ import annotations

import time

from metaopt.core.errors import UserError
from metaopt.meta_agent.proposers.base import Evidence, Revision
from metaopt.task_agent.harness import Harness

SENTENCES = (
    "This line is a placebo and asks for nothing.",
    "The sentence you are reading changes nothing about the task.",
    "No instruction follows from this note.",
    "This remark is here by design and has no bearing on your work.",
    "Nothing in this sentence is a request.",
    "Ignore nothing and do nothing differently because of this line.",
    "This is a neutral note with no content.",
    "The presence of this sentence is not a hint.",
)
"""Neutral sentences, used in turn; past the list they repeat with a number, so the supply never
runs out and no two proposals of one experiment are the same harness."""


def sentence(i: int) -> str:
    """The i-th neutral sentence (i >= 0): the list in turn, then numbered repeats."""
    text = SENTENCES[i % len(SENTENCES)]
    return text if i < len(SENTENCES) else f"{text[:-1]} (note {i + 1})."


class PlaceboProposer:
    name = "placebo"

    def __init__(self, model: str | None = None, base_url: str | None = None):
        """No model: `model` (meta-model `placebo:S`) is the seconds each proposal waits, as a
        meta-model's call would (default 0); `base_url` is accepted (the registry's signature), unused."""
        try:
            self.latency_s = float(model) if model else 0.0
        except ValueError:
            self.latency_s = -1.0
        if self.latency_s < 0:
            raise UserError(f"placebo:{model}: give the seconds a proposal takes (e.g. placebo:6)", field="--meta-model")

    def propose(self, parent: Harness, evidence: Evidence, tried: set[str]) -> Revision | None:
        """The parent with the first neutral sentence it does not hold yet, and whose child is not
        in `tried` (the (slot+1)-th such with proposals running at once: Evidence.slot), appended to its system prompt (after a blank line). Never None: the supply is
        unbounded. Reads no evidence and costs nothing (it waits `latency_s` first)."""
        time.sleep(self.latency_s)
        system = parent.prompts.system
        i, skip = 0, getattr(evidence, "slot", 0)  # it reads no evidence but this (callers may pass None)
        while True:
            if sentence(i) in system:
                i += 1
                continue
            data = parent.model_dump(mode="json", exclude_unset=True)
            data.setdefault("prompts", {})["system"] = f"{system}\n\n{sentence(i)}" if system else sentence(i)
            child = Harness.model_validate(data)
            if child.content_hash() not in tried and skip > 0:  # left to the proposals running beside it
                skip -= 1
            elif child.content_hash() not in tried:
                return Revision(child, f"placebo: appended neutral sentence #{i + 1} to the system prompt "
                                       f"({sentence(i)!r}); it cannot change what the task model does")
            i += 1
