"""The experiment's memory, as typed records read from the store, and its notebook.

    load(store, experiment_id) -> [CandidateRecord]      every candidate so far, oldest first
    notes(store, experiment_id) -> [NotebookEntry]; add_note(store, experiment_id, text, ...)

What a record holds, and what it never holds: id, parent, proposer, status and its reason (a
refusal for task-specific content says only that: guard.public_reason),
rationale, diff against the parent, the manifest (cause, predicted fixes and keeps) and its check,
liveness, the gate rows (stage, outcome, delta, SE, threshold, n, coverage, reason) and the
per-task outcome on every TRAIN task the candidate ran, next to its parent's, with the flips.
Validation results are aggregate only (the gate row: outcome, delta, SE), never per task, and
test results are not in a record at all: per-task held-out results would turn the validation
split into training data, and the test split is sealed until the experiment ends.

Readers: the meta-agent's history tools (meta_agent.proposers.llm_tools_history), the heuristic proposer
(which never re-proposes a change rejected for the same cause) and any strategy.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from metaopt.meta_agent import records
from metaopt.meta_agent.guard import public_reason
from metaopt.meta_agent.outcomes import Liveness
from metaopt.meta_agent.predictions import Manifest, PredictionCheck, passes
from metaopt.meta_agent.records import NotebookEntry
from metaopt.traces.store import Store, now


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class GateRow(_Rec):
    """One gate decision. For the validation stage only the aggregate numbers exist here."""

    stage: str
    outcome: str
    delta: float | None = None
    se: float | None = None
    threshold: float | None = None
    n_tasks: int | None = None
    coverage: float | None = None
    reason: str = ""


class TrainOutcome(_Rec):
    """One train task under a candidate and under its parent."""

    task_id: str
    child: list[float | None]
    """The candidate's train trial scores (None = errored)."""
    parent: list[float | None]
    """The parent's train trial scores on the same task ([] when it has none)."""
    flip: Literal["fixed", "broke"] | None = None
    """fixed: passes now, did not under the parent; broke: the reverse (see predictions.passes)."""


class CandidateRecord(_Rec):
    candidate_id: str
    parent_id: str | None
    iteration: int
    proposer: str | None
    status: str
    status_reason: str | None
    rationale: str | None
    diff: str | None
    harness_hash: str
    proposal_trace_id: str | None = None
    predictions: Manifest | None = None
    prediction_check: PredictionCheck | None = None
    liveness: Liveness | None = None
    gate: list[GateRow] = Field(default_factory=list)
    train: list[TrainOutcome] = Field(default_factory=list)
    """Every train task the candidate ran (the screen's tasks, or all of train once accepted)."""

    @property
    def short(self) -> str:
        return self.candidate_id.rsplit("/", 1)[-1]

    def flips(self, kind: str) -> list[str]:
        return [t.task_id for t in self.train if t.flip == kind]


def _j(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v


def load(store: Store, experiment_id: str) -> list[CandidateRecord]:
    """Every candidate of the experiment, oldest first (an unknown experiment: [])."""
    cands = records.candidate_rows(store, experiment_id)
    if not cands:
        return []
    gates = records.gate_rows(store, experiment_id)
    train: dict[str, dict[str, list[float | None]]] = {}
    for r in records.train_trial_scores(store, experiment_id):
        train.setdefault(r["candidate_id"], {}).setdefault(r["task_id"], []).append(r["score"])
    out = []
    for c in cands:
        mine, theirs = train.get(c["candidate_id"], {}), train.get(c["parent_id"] or "", {})
        outcomes = []
        for task, scores in sorted(mine.items()):
            before, after = passes(theirs.get(task)), passes(scores)
            flip = None if before is None or after is None or before == after else ("fixed" if after else "broke")
            outcomes.append(TrainOutcome(task_id=task, child=scores, parent=theirs.get(task, []), flip=flip))
        out.append(CandidateRecord(
            **{k: c[k] for k in ("candidate_id", "parent_id", "iteration", "proposer", "status",
                                 "rationale", "diff", "harness_hash", "proposal_trace_id")},
            status_reason=public_reason(c["status_reason"]),  # no evasion oracle: not what the guard matched
            predictions=_j(c["predictions"]), prediction_check=_j(c["prediction_check"]), liveness=_j(c["liveness"]),
            gate=[GateRow(**{k: v for k, v in g.items() if k not in ("candidate_id", "reason")},
                          reason=public_reason(g.get("reason")) or "")
                  for g in gates if g["candidate_id"] == c["candidate_id"]],
            train=outcomes))
    return out


def train_scores(store: Store, experiment_id: str, candidate_id: str) -> dict[str, list[float | None]]:
    """A candidate's train trial scores by task."""
    out: dict[str, list[float | None]] = {}
    for r in records.train_trial_scores(store, experiment_id, candidate_id):
        out.setdefault(r["task_id"], []).append(r["score"])
    return out


def train_tasks(store: Store, experiment_id: str) -> list[str]:
    """The experiment's train split ([] for an unknown experiment)."""
    return list((records.experiment_splits(store, experiment_id) or {}).get("train", []))


# -- the notebook ---------------------------------------------------------------------------------------
MAX_NOTE = 2000  # characters per entry
_NOTES = threading.Lock()  # proposals in flight at once (--parallel) share the notebook: one seq each


def notes(store: Store, experiment_id: str) -> list[NotebookEntry]:
    return store.select(NotebookEntry, "experiment_id = ?", [experiment_id], order="seq")


def add_note(store: Store, experiment_id: str, text: str, *, parent_id: str | None = None,
             trace_id: str | None = None) -> NotebookEntry:
    """Append an entry (clipped to MAX_NOTE characters) and return it."""
    with _NOTES:
        seq = records.next_note_seq(store, experiment_id)
        entry = NotebookEntry(experiment_id=experiment_id, seq=seq, parent_id=parent_id, trace_id=trace_id,
                              text=text.strip()[:MAX_NOTE], written_at=now())
        store.insert(entry)
    return entry
