"""`bilevel`: an outer loop over a base strategy (greedy or pareto, RunConfig.bilevel.base). It picks
parents through the base strategy, then lets Level 1.5 and the search mechanisms (built-in and
generated, meta_agent/search/mechanisms/) change the pick, add guidance to the proposer's prompt and
drop revisions before they cost trials. The work is in meta_agent/search/bilevel/ (outer.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from metaopt.meta_agent.records import CandidateView
from metaopt.meta_agent.search.view import SearchView
from metaopt.task_agent.harness import Harness

if TYPE_CHECKING:
    from metaopt.meta_agent.search.bilevel.outer import BilevelSearch
    from metaopt.meta_agent.search.strategies import Strategy


class Bilevel:
    name = "bilevel"

    def __init__(self) -> None:
        from metaopt.meta_agent.search.strategies.greedy import Greedy

        self.base: Strategy = Greedy()
        self.search: BilevelSearch | None = None

    def bind(self, experiment: SearchView) -> BilevelSearch:
        """Attach to the experiment's read-only view (called once by the loop): returns the outer
        loop's hooks."""
        from metaopt.meta_agent.search.bilevel.outer import BilevelSearch
        from metaopt.meta_agent.search.strategies import get_strategy

        self.base = get_strategy(experiment.cfg.bilevel.base)
        self.search = BilevelSearch(experiment, self.base)
        return self.search

    def select(self, candidates: list[CandidateView], rng) -> CandidateView:
        pick = self.base.select(candidates, rng)
        return self.search.select(candidates, pick) if self.search else pick

    def merge(self, candidates: list[CandidateView], rng, tried: set[str]) -> tuple[Harness, list[str], str] | None:
        return self.base.merge(candidates, rng, tried)
