"""The inner loop's record as the protocol's plain JSON (see meta_agent/search/mechanisms/protocol.py),
read from the store alone, so it is the same live, in the contract test and after a resume.

    snap = Snapshot.read(store, experiment_id)
    snap.history            [candidate, ...] oldest first
    snap.decision(cid)      the candidate's final decision (its last gate row)
    snap.revision(cid)      what it changed against its parent
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from metaopt.meta_agent.records import Candidate, GateDecision, trials_per_candidate, validation_means
from metaopt.meta_agent.search.bilevel.areas import changes
from metaopt.traces.store import Store

RATIONALE = 500
DIFF = 4000


@dataclass
class Snapshot:
    history: list[dict[str, Any]]
    decisions: dict[str, dict[str, Any]]
    revisions: dict[str, dict[str, Any]]
    trials_spent: int
    rows: list[Candidate] = field(default_factory=list)

    @classmethod
    def read(cls, store: Store, experiment_id: str) -> Snapshot:
        cands = store.select(Candidate, "experiment_id = ?", [experiment_id], order="iteration")
        gates = store.select(GateDecision, "experiment_id = ?", [experiment_id], order="decided_at")
        trials = trials_per_candidate(store, experiment_id)
        val = validation_means(store, experiment_id)
        last: dict[str, GateDecision] = {}
        val_delta: dict[str, float] = {}
        accepted: set[str] = set()
        for g in gates:
            last[g.candidate_id] = g
            if g.candidate_id in accepted:
                continue
            if g.stage == "confirm" and g.outcome == "accept":  # the staged gate's honest estimate
                est = (g.details or {}).get("estimate") or {}
                val_delta[g.candidate_id] = est.get("adjusted_gain", g.delta)
                accepted.add(g.candidate_id)
            elif g.stage in ("validation", "select", "confirm") and g.delta is not None:
                val_delta[g.candidate_id] = g.delta
        by_id = {c.candidate_id: c for c in cands}
        children: dict[str, int] = {}
        for c in cands:
            if c.parent_id:
                children[c.parent_id] = children.get(c.parent_id, 0) + 1
        history, revisions = [], {}
        for c in cands:
            parent = by_id.get(c.parent_id or "")
            areas, kinds = changes(parent.harness, c.harness) if parent else ([], [])
            history.append({
                "id": c.candidate_id, "parent_id": c.parent_id, "iteration": c.iteration, "status": c.status,
                "reason": c.status_reason, "proposer": c.proposer, "areas": areas, "kinds": kinds,
                "rationale": (c.rationale or "")[:RATIONALE], "val_mean": val.get(c.candidate_id),
                "val_delta": val_delta.get(c.candidate_id), "trials": trials.get(c.candidate_id, 0),
                "children": children.get(c.candidate_id, 0)})
            if parent:
                revisions[c.candidate_id] = {"parent_id": c.parent_id, "rationale": c.rationale or "",
                                             "areas": areas, "kinds": kinds, "diff": (c.diff or "")[:DIFF]}
        decisions = {cid: decision_json(g) for cid, g in last.items()}
        return cls(history, decisions, revisions, sum(trials.values()), cands)

    def candidate(self, cid: str) -> dict[str, Any]:
        return next(c for c in self.history if c["id"] == cid)

    def decision(self, cid: str) -> dict[str, Any]:
        c = self.candidate(cid)
        return self.decisions.get(cid) or {"stage": "validation", "outcome": "pass", "reason": c["reason"] or "",
                                           "delta": None, "se": None}

    def revision(self, cid: str) -> dict[str, Any] | None:
        return self.revisions.get(cid)

    def parents(self, default: str | None) -> list[dict[str, Any]]:
        """The possible parents (baseline, accepted), the strategy's pick marked "default"."""
        return [{**c, "default": c["id"] == default} for c in self.history if c["status"] in ("baseline", "accepted")]


def decision_json(g: GateDecision) -> dict[str, Any]:
    return {"stage": g.stage, "outcome": g.outcome, "reason": g.reason, "delta": g.delta, "se": g.se}


def context(snap: Snapshot, *, iteration: int, max_iterations: int, proposer: dict[str, Any],
            search: dict[str, Any], upto: int | None = None) -> dict[str, Any]:
    """The ctx a hook gets at `iteration`; `upto` cuts the history (the contract test replays
    the record as it stood then)."""
    history = snap.history if upto is None else snap.history[:upto]
    kept = [c["id"] for c in history if c["status"] in ("baseline", "accepted")]
    return {"iteration": iteration, "max_iterations": max_iterations,
            "trials_spent": sum(c["trials"] for c in history), "incumbent": kept[-1] if kept else None,
            "proposer": proposer, "search": search, "history": history}
