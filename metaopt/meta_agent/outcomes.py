"""What a decision says of a candidate, as data: its status, the stage a gate row was taken at,
and whether the parts its revision changed ran (`Liveness`, measured by meta_agent.liveness).

Pure records with no project imports: the decision (meta_agent.judge) names them without
reaching the store or the spans they are measured from.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["baseline", "pending", "accepted", "rejected", "inconclusive", "invalid"]
Stage = Literal["guard", "smoke", "screen", "validation", "select", "confirm", "verdict", "filter"]
"""Where a gate decision was taken (gate_decisions.stage)."""


class Change(BaseModel):
    """One changed part of a revision and whether the spans show it ran."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    part: str
    """Which part: `tools.bash`, `prompt of role main`, `routing.limits.max_turns`, ..."""
    what: str
    """The change: `added`, `removed`, `changed: timeout_s`, `8 -> 16`, ..."""
    proof: str
    """What would show it ran."""
    live: bool | None = None
    """True: it ran; False: it did not; None: spans cannot tell."""
    evidence: str = ""
    """What the spans showed (counts)."""
    spans: list[str] = Field(default_factory=list)
    """Up to three span ids that show it."""


class Liveness(BaseModel):
    """Whether a candidate's changes ran, measured on one split's trials."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    split: str
    """The trials looked at: `train` (the screen) or `validation`."""
    trials: int
    """How many of the candidate's trials on that split."""
    live: bool | None
    """True: some change ran; False: none did (or nothing that runs changed); None: cannot tell."""
    changes: list[Change] = Field(default_factory=list)
    reason: str = ""
    """One sentence for the candidate's status reason and the explorer."""
