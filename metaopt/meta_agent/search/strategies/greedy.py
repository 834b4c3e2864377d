"""`greedy`: always extend the incumbent, the latest candidate the gate accepted (the Karpathy
loop, with the keep/discard step done by the gate instead of prompt text)."""

from __future__ import annotations

from metaopt.meta_agent.records import CandidateView


class Greedy:
    name = "greedy"

    def select(self, candidates: list[CandidateView], rng) -> CandidateView:
        kept = [c for c in candidates if c.status in ("baseline", "accepted")]
        return max(kept, key=lambda c: c.iteration)

    def merge(self, candidates: list[CandidateView], rng, tried: set[str]) -> None:
        return None
