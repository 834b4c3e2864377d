"""Search strategies: which candidate to extend next. One small file each, chosen by name
(core.registry; plugins through the `metaopt.strategies` entry-point group), each given a seeded
RNG. `bilevel` steers a base strategy with search mechanisms through the loop's outer-loop seam
(strategies/hooks.py)."""

from __future__ import annotations

from typing import Protocol

from metaopt.core.registry import Registry
from metaopt.meta_agent.records import CandidateView
from metaopt.task_agent.harness import Harness

STRATEGIES = Registry("strategy", "metaopt.strategies", {
    "greedy": "metaopt.meta_agent.search.strategies.greedy:Greedy",
    "pareto": "metaopt.meta_agent.search.strategies.pareto:Pareto",
    "bilevel": "metaopt.meta_agent.search.strategies.bilevel:Bilevel",
}, field="--strategy")


class Strategy(Protocol):
    name: str

    def select(self, candidates: list[CandidateView], rng) -> CandidateView:
        """The parent for the next proposal, from the experiment's candidates."""
        ...

    def merge(self, candidates: list[CandidateView], rng, tried: set[str]
              ) -> tuple[Harness, list[str], str] | None:
        """A child combining two candidates' changes: (harness, [parent ids], rationale), or None
        (strategies that do not merge always return None). `tried`: harness hashes proposed so far."""
        ...


def get_strategy(name: str) -> Strategy:
    """An instance of the strategy called `name`. Raises UnknownName."""
    return STRATEGIES.load(name)()
