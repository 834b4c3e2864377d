"""SearchView: what a search strategy, and bilevel's outer loop, sees of a running experiment.

Read-only: the candidates and their decisions (from the ledger), their scores so far, the budget
left, the settings and the proposer it may inspect. It never sees the Experiment. The one thing a
search may book is the cost of its own model calls (`charge`, a meta spend row); the tables of its
own records it writes through `store`, which it owns (meta_agent/search/bilevel/records.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.ledger import Ledger
from metaopt.meta_agent.records import Candidate, CandidateScores, GateDecision
from metaopt.sandbox.base import Backend
from metaopt.traces.store import Store

if TYPE_CHECKING:
    from metaopt.meta_agent.proposers.base import Proposer


@dataclass(frozen=True)
class SearchView:
    experiment_id: str
    cfg: RunConfig
    proposer: Proposer
    """The proposer (its name, takes_guidance, areas, model, last_run, opening are read)."""
    backend: Backend | None
    """The sandbox backend, for a generated mechanism's host."""
    say: Callable[[str], None]
    _ledger: Ledger
    _scores: Mapping[str, CandidateScores]

    @property
    def store(self) -> Store:
        return self._ledger.store

    def candidates(self) -> list[Candidate]:
        """The experiment's candidates, oldest first (the history)."""
        return self._ledger.candidates()

    def scores(self, cid: str) -> CandidateScores | None:
        return self._scores.get(cid)

    def decisions(self, cid: str) -> list[GateDecision]:
        return [d for d in self.store.select(GateDecision, "experiment_id = ? AND candidate_id = ?",
                                             [self.experiment_id, cid], order="decided_at")]

    def budget_left(self) -> float | None:
        """USD left of --budget-usd (None: no money limit)."""
        if self.cfg.budget_usd is None:
            return None
        spent = self._ledger.spent()
        return self.cfg.budget_usd - spent["task"] - spent["meta"]

    def charge(self, ref: str, usd: float | None) -> None:
        """Book what one of the search's own model sessions cost (a meta spend row)."""
        self._ledger.spend("meta", None, ref, usd)
