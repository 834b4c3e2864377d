"""The Proposer protocol and what it exchanges with the optimizer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from task_agent.harness import Harness
from traces.store import Store


@dataclass(frozen=True)
class Evidence:
    """What a proposer may look at: the parent's failing *train* trials in the store. Test-split
    trials are never listed here (the test split is sealed)."""

    store: Store
    trial_ids: list[str]
    experiment_id: str


@dataclass(frozen=True)
class Revision:
    """A proposed child harness, why, and the span / trial ids that support it."""

    harness: Harness
    rationale: str
    cites: list[str] = field(default_factory=list)
    usd: float = 0.0  # what proposing it cost (meta-agent spend)


class Proposer(Protocol):
    name: str

    def propose(self, parent: Harness, evidence: Evidence, tried: set[str]) -> Revision | None:
        """A new revision of `parent`, or None when it has nothing (left) to propose. `tried` holds
        the content hashes of harnesses already proposed in this experiment (skip them)."""
        ...
