"""Seeded train / validation / test splits of a task list.

The proposer reads train traces; the gate decides on validation; test is sealed: evaluated once,
at the end, and its traces are never shown to a proposer.
"""

from __future__ import annotations

import random

from metaopt.core.errors import SplitError


def parse_split(text: str) -> tuple[float, float, float]:
    """'0.5,0.25,0.25' (train, validation, test) -> fractions that sum to 1."""
    try:
        parts = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise SplitError(f"--split: '{text}' is not three comma-separated fractions (train,validation,test)") from None
    if len(parts) != 3 or any(p <= 0 for p in parts) or abs(sum(parts) - 1.0) > 1e-6:
        raise SplitError(f"--split: '{text}' must be three positive fractions that sum to 1 (e.g. 0.5,0.25,0.25)")
    return parts  # type: ignore[return-value]


def split_tasks(task_ids: list[str], seed: int, fractions: tuple[float, float, float]) -> dict[str, list[str]]:
    """Shuffle with `seed`, then cut by `fractions`. Same ids + seed -> same split, whatever the
    order the ids came in. Raises SplitError when a set would be empty."""
    ids = sorted(set(task_ids))
    random.Random(seed).shuffle(ids)
    n = len(ids)
    n_train = round(n * fractions[0])
    n_val = round(n * fractions[1])
    out = {"train": sorted(ids[:n_train]), "validation": sorted(ids[n_train:n_train + n_val]),
           "test": sorted(ids[n_train + n_val:])}
    empty = [k for k, v in out.items() if not v]
    if empty:
        raise SplitError(f"--split: {n} tasks leave the {empty[0]} set empty; use more tasks or other fractions")
    return out
