"""The experiment's typed rows (tables from traces/migrations.py 0003 and 0004) and the small typed state
the loop keeps between decisions. Written by column name, read back typed (traces.records)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from metaopt.meta_agent.gate import CandidateScores, Scores
from metaopt.meta_agent.liveness import Liveness
from metaopt.meta_agent.predictions import Manifest, PredictionCheck
from metaopt.task_agent.harness import Harness
from metaopt.traces.records import Record

__all__ = ["CandidateScores"]  # defined with the gate (meta_agent.gate); read from here too

Status = Literal["baseline", "pending", "accepted", "rejected", "inconclusive", "invalid"]
Stage = Literal["guard", "smoke", "screen", "validation", "select", "confirm", "verdict", "filter"]
"""Where a gate decision was taken (gate_decisions.stage)."""
SpendKind = Literal["task", "meta", "saved"]
"""What money or trials went on (spend.kind)."""


class ExperimentRecord(Record, table="experiments"):
    experiment_id: str
    benchmark: str
    config: dict[str, Any]
    """{"run": RunConfig as JSON, "harness": what --harness named}."""
    splits: dict[str, list[str]]
    """{train: [task ids], validation: [...], test: [...]}."""
    status: Literal["running", "finished", "interrupted", "failed"]
    started_at: datetime
    finished_at: datetime | None = None
    result: dict[str, Any] | None = None
    """The final report (the `metaopt run --json` object)."""


class Candidate(Record, table="candidates"):
    candidate_id: str
    experiment_id: str
    parent_id: str | None = None
    iteration: int
    """0 = the starting harness."""
    status: Status
    proposer: str | None = None
    rationale: str | None = None
    evidence: list[str] = Field(default_factory=list)
    """Trial ids / span ids the proposal cites."""
    diff: str | None = None
    """Unified diff against the parent's harness."""
    harness: Harness
    """Full snapshot of the harness."""
    harness_hash: str
    status_reason: str | None = None
    created_at: datetime
    proposal_trace_id: str | None = None
    """The meta-agent session (an `invoke_agent meta-agent` trace) that proposed it."""
    predictions: Manifest | None = None
    """Its falsifiable claim: the cause addressed, train tasks it should fix and must keep."""
    prediction_check: PredictionCheck | None = None
    """The claim held against the train results after the screen and validation."""
    liveness: Liveness | None = None
    """Whether its changed parts ran (from its spans), on the last split it was judged on."""
    mechanisms: list[str] = Field(default_factory=list)
    """Content hashes of the search mechanisms active when it was proposed (strategy bilevel)."""


class NotebookEntry(Record, table="notebook"):
    """One entry of the meta-agent's notebook (meta_agent.proposers.history)."""

    experiment_id: str
    seq: int
    """1, 2, ... per experiment, in writing order."""
    parent_id: str | None = None
    """The candidate the session was proposing a child of."""
    trace_id: str | None = None
    """The meta-agent session that wrote it."""
    text: str
    written_at: datetime


class GateDecision(Record, table="gate_decisions"):
    experiment_id: str
    candidate_id: str
    parent_id: str | None = None
    stage: Stage
    """select / confirm: the staged gate's looks (meta_agent.sequential); verdict: the closing row after them
    (the outcome, the claim check, liveness); validation: the fixed gate; filter: dropped by a search
    mechanism before any trial (strategy bilevel)."""
    outcome: str
    """pass | fail | accept | reject | inconclusive | continue | futile."""
    delta: float | None = None
    se: float | None = None
    threshold: float | None = None
    n_tasks: int | None = None
    coverage: float | None = None
    reason: str
    rule: str
    """The rule the decision applied, in words."""
    details: dict[str, Any] | None = None
    decided_at: datetime
    alpha_spent: float | None = None
    """Experiment-wise alpha this row committed: alpha_j on a candidate's first confirm look, 0 on
    every other row; their sum over an experiment never exceeds the rule's alpha."""


class Spend(Record, table="budget_ledger"):
    experiment_id: str
    candidate_id: str | None = None
    kind: SpendKind
    """saved: validation trials a stopped look did not run (usd: what they would have cost, priced
    from the trials run so far)."""
    ref: str | None = None
    """The trial id, or the proposal it paid for, or why trials were saved."""
    usd: float | None = None
    """None when the price is unknown."""
    trials: int | None = None
    """kind saved: how many trials were not run."""
    input_tokens: int = 0
    output_tokens: int = 0
    recorded_at: datetime


class CandidateView(BaseModel):
    """What a strategy sees of one candidate."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    candidate_id: str
    parent_id: str | None = None
    iteration: int
    status: Status
    harness: Harness
    val_scores: Scores = Field(default_factory=dict)
    """Validation task -> trial scores (None = an errored trial); {} when never validated."""
    val_mean: float = 0.0
