"""The staged gate's trial plan: what an experiment commits to before it starts (`metaopt run`
prints it; the loop prices an iteration from it). The gate itself is meta_agent.sequential,
judged per candidate by meta_agent.judge."""

from __future__ import annotations

from metaopt.meta_agent.sequential import SequentialRule


def preflight(splits: dict[str, list[str]], k: int, gate: SequentialRule = SequentialRule()) -> dict[str, int]:
    """Trial counts an experiment commits to: the baseline, each iteration at most (smoke, screen,
    every look of the staged gate, a new parent reserve), the test."""
    n_val = len(splits["validation"])
    kc, kr = gate.confirm_plan(k)[-1]
    return {"baseline": (len(splits["train"]) + n_val) * k,
            "per_iteration": 1 + len(splits["train"]) * k + (k + kc + kr) * n_val, "test": 2 * len(splits["test"]) * k}
