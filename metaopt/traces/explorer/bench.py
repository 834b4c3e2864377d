"""The explorer's meta-bench view: `metaopt bench meta` runs, one row per case, and their totals.

A declared reader of meta_bench_results (its owner, meta_bench.results, lists this module in its
Schema.readers): the explorer sits below meta_bench in the layer stack and imports nothing of it.
The totals and their Wilson intervals are defined here, once, and meta_bench's own table uses
them too, so the terminal and the page agree. A store written before the table existed opens
without it (reader_optional): then there are no bench runs.
"""

from __future__ import annotations

import json
import math
from typing import Any

from metaopt.core.errors import NotFound
from metaopt.traces.store import Store

RUNS = 50  # newest bench runs listed


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n ((0, 1) when n is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, mid - half), min(1.0, mid + half)


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A bench run's totals over its case rows (dicts with the meta_bench_results columns): cases
    fixed and causes named with 95% Wilson intervals, collateral damage (keep tasks broken), turns,
    tokens, cost and wall time summed."""
    n = len(rows)
    fixed = sum(bool(r["fixed"]) for r in rows)
    named = sum(bool(r["cause_named"]) for r in rows)
    return {"cases": n, "fixed": fixed, "fixed_rate": fixed / n if n else 0.0, "fixed_ci95": list(wilson(fixed, n)),
            "cause_named": named, "cause_named_ci95": list(wilson(named, n)),
            "collateral": sum(len(r["broken"] or []) for r in rows), "turns": sum(r["turns"] or 0 for r in rows),
            "input_tokens": sum(r["input_tokens"] or 0 for r in rows),
            "output_tokens": sum(r["output_tokens"] or 0 for r in rows),
            "cost_usd": sum(r["cost_usd"] or 0.0 for r in rows), "wall_s": sum(r["wall_s"] or 0.0 for r in rows)}


def bench_runs(store: Store, bench_id: str | None = None) -> dict[str, Any]:
    """The newest bench runs (or the one `bench_id` names), newest first: each with its meta-model,
    per-case rows and totals. Raises NotFound for an unknown bench_id."""
    if not store.has_table("meta_bench_results"):
        if bench_id is not None:
            raise NotFound(f"no bench run {bench_id!r} in store {store.path} (it holds no meta-bench results)")
        return {"runs": []}
    rows = store.rows(
        "SELECT bench_id, case_name, meta_model, category, proposed, fixed, cause_named, broken, turns, input_tokens,"
        " output_tokens, cost_usd, wall_s, cause, changed, error, finished_at FROM meta_bench_results"
        " WHERE bench_id IN (SELECT bench_id FROM meta_bench_results WHERE ? IS NULL OR bench_id = ?"
        " GROUP BY bench_id ORDER BY max(finished_at) DESC LIMIT ?) ORDER BY bench_id, case_name",
        [bench_id, bench_id, RUNS])
    if bench_id is not None and not rows:
        raise NotFound(f"no bench run {bench_id!r} in store {store.path}")
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for k in ("broken", "changed"):
            r[k] = json.loads(r[k]) if isinstance(r[k], str) else (r[k] or [])
        by.setdefault(r["bench_id"], []).append(r)
    runs = [{"bench_id": b, "meta_model": cases[0]["meta_model"], "finished_at": max(c["finished_at"] for c in cases),
             "cases": cases, "totals": totals(cases)} for b, cases in by.items()]
    runs.sort(key=lambda x: x["finished_at"], reverse=True)
    return {"runs": runs}
