"""Search strategies: which candidate to extend next. One small file each, chosen by name, each
given a seeded RNG. `bilevel` (a strategy that rewrites the search itself) is not built yet."""

from __future__ import annotations

from typing import Protocol

STRATEGIES = {"greedy": "meta_agent.strategies.greedy:Greedy"}
STRATEGIES["pareto"] = "meta_agent.strategies.pareto:Pareto"


class Strategy(Protocol):
    name: str

    def select(self, candidates: list[dict], rng) -> dict:
        """The parent for the next proposal, from the experiment's candidate rows (each with
        `candidate_id`, `status`, `iteration` and `val_mean`)."""
        ...


class UnknownStrategy(ValueError):
    pass


def get_strategy(name: str) -> Strategy:
    from meta_agent.lookup import lookup

    return lookup(STRATEGIES, name, "strategy", UnknownStrategy)
