"""What to export: a harness (from a candidate in the store, or a folder) and where it came from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaopt.core.errors import ExportError, HarnessError
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.harness_io import SHIPPED, load_harness


@dataclass
class Source:
    """The harness and its provenance. `candidate` is None for a harness folder."""

    harness: Harness
    label: str
    candidate: dict[str, Any] | None = None
    experiment: dict[str, Any] | None = None
    lineage: list[dict[str, Any]] = field(default_factory=list)  # the candidate first, then its parents
    scores: list[dict[str, Any]] = field(default_factory=list)  # per split: mean score, trials
    decisions: list[dict[str, Any]] = field(default_factory=list)


def load_source(ref: str, db: Path) -> Source:
    """A harness folder (a path holding harness.yaml) or a candidate id in the store `db`."""
    path = Path(ref)
    if not path.exists() and (SHIPPED / ref / "harness.yaml").is_file():
        path = SHIPPED / ref  # a shipped harness by name: baseline, minimal
    if path.is_dir() or path.name == "harness.yaml":
        try:
            return Source(load_harness(path), label=str(path))
        except HarnessError as e:
            raise ExportError(str(e)) from None
    from metaopt.traces.store import Store, StoreError

    if not Path(db).exists():
        raise ExportError(f"{ref}: not a harness folder, and there is no store {db} to look it up in (--db)")
    try:
        with Store(db, read_only=True) as s:
            return _from_store(s, ref, db)
    except StoreError as e:
        raise ExportError(str(e)) from None


def _from_store(s: Any, cid: str, db: Path) -> Source:
    from metaopt.meta_agent import records

    cand = records.candidate_row(s, cid)
    if cand is None:
        recent = records.latest_candidate_ids(s, 3)
        hint = f" (latest: {', '.join(recent)})" if recent else " (it holds no candidates)"
        raise ExportError(f"candidate {cid!r}: no such candidate in {db} and no such harness folder{hint}")
    try:
        harness = Harness.model_validate(json.loads(cand["harness"]))
    except ValueError as e:
        raise ExportError(f"candidate {cid!r}: stored harness is invalid: {str(e).splitlines()[0]}") from None
    exp = records.experiment_summary(s, cand["experiment_id"])
    lineage, seen, current = [], set(), cand
    while current is not None and current["candidate_id"] not in seen:
        seen.add(current["candidate_id"])
        lineage.append({k: current[k] for k in ("candidate_id", "iteration", "status", "proposer", "rationale")})
        parent = current["parent_id"]
        current = records.candidate_row(s, parent) if parent else None
    scores = records.split_scores(s, cid)
    decisions = records.candidate_decisions(s, cid)
    return Source(harness, label=cid, candidate=cand, experiment=exp, lineage=lineage, scores=scores,
                  decisions=decisions)


def provenance_markdown(src: Source) -> str:
    """The "Where it came from" section of every export's README."""
    h = src.harness
    lines = ["## Where it came from", "",
             f"- harness `{h.name}` (content hash `{h.content_hash()[:16]}`): {h.description or 'no description'}"]
    if src.candidate is None:
        lines.append(f"- exported from the harness folder `{src.label}` (no store record)")
        return "\n".join(lines) + "\n"
    c, e = src.candidate, src.experiment or {}
    lines += [f"- candidate `{c['candidate_id']}` (iteration {c['iteration']}, status **{c['status']}**"
              + (f": {c['status_reason']}" if c.get("status_reason") else "") + ")",
              (f"- experiment `{c['experiment_id']}` on benchmark `{e.get('benchmark', '?')}` "
              f"(status {e.get('status', '?')}, started {e.get('started_at', '?')})")]
    if c.get("proposer"):
        lines.append(f"- proposed by `{c['proposer']}`: {c.get('rationale') or ''}")
    lines += ["", "### Scores", "", "| split | trials | mean score | errors |", "|---|---|---|---|"]
    for r in src.scores:
        mean = "-" if r["mean_score"] is None else f"{r['mean_score']:.3f}"
        lines.append(f"| {r['split'] or '-'} | {r['trials']} | {mean} | {r['errors']} |")
    if not src.scores:
        lines.append("| - | 0 | - | - |")
    if src.decisions:
        lines += ["", "### Gate decisions", ""]
        lines += [f"- {d['stage']}: **{d['outcome']}**: {d['reason']}" for d in src.decisions]
    lines += ["", "### Lineage (this candidate first)", ""]
    lines += [f"{i + 1}. `{x['candidate_id']}` (iteration {x['iteration']}, {x['status']}"
              + (f", {x['proposer']}" if x.get("proposer") else "") + ")"
              + (f": {x['rationale']}" if x.get("rationale") else "")
              for i, x in enumerate(src.lineage)]
    return "\n".join(lines) + "\n"
