"""Run a meta-model once per case and score what it proposes.

    run_bench(cases, "local/qwen2.5-coder-1.5b", store) -> BenchResult

Per case: the recorded traces go into a scratch store; the proposer (`heuristic`, `placebo`,
`oracle`, or any `provider/model` for the llm meta-agent, the same briefing, tools and structured
edits as `metaopt run`) proposes one revision of the defective harness from the failing trials;
meta_bench.check replays the affected and keep tasks under it (a task replay cannot judge runs for
real with `live`, meta_bench.live). The meta-agent sees the case under a neutral harness name
(case.neutral_name), never its folder name. `suggestions` off gives the briefing no suggested
edits. Each case's row (with its split) lands in the store's meta_bench_results table
(meta_bench.results).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from metaopt.core.errors import ModelError, SystemicError
from metaopt.meta_agent.proposers import get_proposer
from metaopt.meta_agent.proposers.base import Evidence
from metaopt.meta_bench import results
from metaopt.meta_bench.case import Case
from metaopt.meta_bench.check import judge
from metaopt.meta_bench.live import Live
from metaopt.meta_bench.oracle import OracleProposer
from metaopt.meta_bench.results import CaseResult, totals
from metaopt.meta_bench.traces import import_traces
from metaopt.task_agent.harness import Harness
from metaopt.traces.store import Store

SCRIPTED = ("oracle", "heuristic", "placebo")


@dataclass
class BenchResult:
    bench_id: str
    meta_model: str
    rows: list[CaseResult] = field(default_factory=list)

    def totals(self, split: str = "all") -> dict[str, Any]:
        """The same totals (Wilson intervals included) as the explorer's bench page, over the
        cases of `split` (dev, heldout or all)."""
        return totals([r.model_dump() for r in self.rows if split in ("all", r.split)])

    def to_json(self) -> dict[str, Any]:
        """Every case, the totals over all of them, and the totals of each split run (`by_split`)."""
        return {"bench_id": self.bench_id, "meta_model": self.meta_model,
                "cases": [r.model_dump(mode="json", exclude={"bench_id", "meta_model"}) for r in self.rows],
                "totals": self.totals(), "by_split": {s: self.totals(s) for s in sorted({r.split for r in self.rows})}}


def make_proposer(meta_model: str, case: Case, base_url: str | None = None) -> Any:
    if meta_model == "oracle":
        return OracleProposer(case)
    return get_proposer(meta_model, base_url=base_url)


def run_bench(cases: list[Case], meta_model: str, store: Store, *, base_url: str | None = None,
              on_case: Callable[[CaseResult], None] | None = None, bench_id: str | None = None,
              on_event: Callable[[str], None] | None = None, live: Live | None = None,
              suggestions: bool = True) -> BenchResult:
    """Every case once with `meta_model`; rows are saved in `store` as each case ends. `on_event`
    gets the meta-agent's progress lines (one per model turn); `live` runs for real what replay
    cannot judge (None: such tasks are unjudged); `suggestions` off: no suggested edits in the
    briefing."""
    result = BenchResult(bench_id or f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}", meta_model)
    for case in cases:
        row = run_case(case, meta_model, result.bench_id, base_url=base_url, on_event=on_event, live=live,
                       suggestions=suggestions)
        results.save(store, row)
        result.rows.append(row)
        if on_case is not None:
            on_case(row)
    return result


def briefed(case: Case, store: Store, *, suggestions: bool = True,
            on_event: Callable[[str], None] | None = None) -> tuple[Harness, Evidence]:
    """The parent harness and the evidence the meta-agent gets for `case`, its traces loaded into
    `store`: under the case's neutral name (the folder name often names the defect)."""
    parent = case.harness().model_copy(update={"name": case.neutral_name})
    trials = import_traces(store, case.folder / "traces.jsonl", rename={case.name: case.neutral_name})
    return parent, Evidence(store=store, trial_ids=trials, experiment_id=f"meta-bench:{case.neutral_name}",
                            on_event=on_event, suggestions=suggestions)


def run_case(case: Case, meta_model: str, bench_id: str, *, base_url: str | None = None,
             on_event: Callable[[str], None] | None = None, live: Live | None = None,
             suggestions: bool = True) -> CaseResult:
    m = case.manifest
    proposer = make_proposer(meta_model, case, base_url)
    base = {"bench_id": bench_id, "case_name": case.name, "meta_model": meta_model, "category": m.category,
            "split": m.split, "suggestions": suggestions}
    scratch = Store(":memory:")  # the case's evidence, for this proposal only
    try:
        parent, evidence = briefed(case, scratch, suggestions=suggestions, on_event=on_event)
        t0 = time.monotonic()
        error = None
        try:
            rev = proposer.propose(parent, evidence, {parent.content_hash()})
        except (ModelError, SystemicError) as e:  # a meta-model that fails is scored as proposing nothing
            rev, error = None, f"{type(e).__name__}: {e}"
        wall = time.monotonic() - t0
    finally:
        scratch.close()
    run = getattr(proposer, "last_run", {}) or {}
    usage = run.get("usage")
    spend = {"turns": int(run.get("turns") or 0), "input_tokens": getattr(usage, "input_tokens", 0) or 0,
                 "output_tokens": getattr(usage, "output_tokens", 0) or 0, "cost_usd": float(run.get("usd") or 0.0),
                 "wall_s": round(wall, 2)}
    if rev is None:
        return CaseResult(**base, proposed=False, fixed=False, cause_named=False, **spend,
                          error=error or str(run.get("outcome") or "no revision"))
    verdict = judge(case, rev.harness, live)
    said = " ".join([rev.manifest.cause if rev.manifest else "", rev.rationale])
    named = re.search(m.cause_pattern, said, re.IGNORECASE) is not None
    return CaseResult(**base, proposed=True, fixed=verdict.fixed, cause_named=named, broken=verdict.broken, **spend,
                      live=verdict.live, unjudged=verdict.unjudged,
                      cause=(rev.manifest.cause if rev.manifest else rev.rationale)[:500],
                      changed=changed_fields(parent.model_dump(mode="json"), rev.harness.model_dump(mode="json")))


def changed_fields(a: Any, b: Any, path: str = "") -> list[str]:
    """Dotted paths where two harness dumps differ (list items of tools by name)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted(set(a) | set(b)) for p in changed_fields(a.get(k), b.get(k), f"{path}.{k}".lstrip("."))]
    named = isinstance(a, list) and isinstance(b, list) and all(isinstance(x, dict) and "name" in x for x in a + b)
    if named:
        left, right = {x["name"]: x for x in a}, {x["name"]: x for x in b}
        return [p for k in sorted(set(left) | set(right)) for p in changed_fields(left.get(k), right.get(k), f"{path}.{k}")]
    return [] if a == b else [path]
