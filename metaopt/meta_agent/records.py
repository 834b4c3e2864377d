"""Owner of the experiment's tables (experiments, candidates, gate_decisions, budget_ledger, notebook):
their DDL (the meta-agent's part of the named migrations), their records and the queries over them
(tests/test_table_owners.py); and the small typed state the loop keeps between decisions. Rows are
written by column name and read back typed (traces.records)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from metaopt.meta_agent.gate import CandidateScores, Scores
from metaopt.meta_agent.outcomes import Liveness, Stage, Status
from metaopt.meta_agent.predictions import Manifest, PredictionCheck
from metaopt.task_agent.harness import Harness
from metaopt.traces.migrations import Schema
from metaopt.traces.records import Record
from metaopt.traces.store import Store

__all__ = ["CandidateScores", "Stage", "Status"]  # defined with the gate (meta_agent.gate) and with the outcomes
# (meta_agent.outcomes); read from here too

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
    """pass | fail | accept | reject | inconclusive | continue | futile | stopped (a stop came before the smoke trial)."""
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


# -- queries ----------------------------------------------------------------------------------------
# -- the Ledger's writes and reads (meta_agent.ledger is their only caller) --------------------
def finish_experiment(store: Store, experiment_id: str, status: str, at: datetime, result: dict[str, Any] | None) -> None:
    store.con.execute("UPDATE experiments SET status = ?, finished_at = ?, result = ? WHERE experiment_id = ?",
                      [status, at, json.dumps(result, default=str) if result is not None else None, experiment_id])


def set_candidate_status(store: Store, candidate_id: str, status: str, reason: str) -> None:
    store.con.execute("UPDATE candidates SET status = ?, status_reason = ? WHERE candidate_id = ?",
                      [status, reason, candidate_id])


def set_candidate_checks(store: Store, candidate_id: str, check: PredictionCheck | None,
                         liveness: Liveness | None) -> None:
    store.con.execute("UPDATE candidates SET prediction_check = ?, liveness = ? WHERE candidate_id = ?",
                      [check.model_dump_json() if check else None, liveness.model_dump_json() if liveness else None,
                       candidate_id])


def saved_booked(store: Store, experiment_id: str, candidate_id: str) -> bool:
    return bool(store.rows("SELECT 1 FROM budget_ledger WHERE experiment_id = ? AND candidate_id = ? AND kind = 'saved'",
                           [experiment_id, candidate_id]))


def saved_trials(store: Store, experiment_id: str) -> int:
    return int(store.rows("SELECT coalesce(sum(trials), 0) AS n FROM budget_ledger WHERE experiment_id = ? "
                          "AND kind = 'saved'", [experiment_id])[0]["n"])


def spend_by_kind(store: Store, experiment_id: str) -> dict[str, float]:
    rows = store.rows("SELECT kind, coalesce(sum(usd), 0) AS usd FROM budget_ledger WHERE experiment_id = ? "
                      "GROUP BY kind", [experiment_id])
    return {r["kind"]: float(r["usd"]) for r in rows}


def trial_count(store: Store, experiment_id: str) -> int:
    return store.rows("SELECT count(*) AS n FROM trials WHERE experiment_id = ?", [experiment_id])[0]["n"]


def failing_train_trials(store: Store, experiment_id: str, candidate_id: str) -> list[str]:
    return [r["trial_id"] for r in store.rows(
        "SELECT trial_id FROM trials WHERE experiment_id = ? AND candidate_id = ? AND split = 'train' "
        "AND (score IS NULL OR score < 1) ORDER BY task_id, attempt", [experiment_id, candidate_id])]


def unfinished_runs(store: Store, experiment_id: str) -> list[str]:
    """Run ids of the experiment that did not finish (their containers may be left)."""
    return [r["run_id"] for r in store.rows("SELECT run_id FROM runs WHERE starts_with(run_id, ?) AND status <> 'finished'",
                                            [experiment_id + "/"])]


def candidate_rows(store: Store, experiment_id: str) -> list[dict[str, Any]]:
    """The experiment's candidates as raw rows (JSON columns as text), oldest first: what the
    meta-agent's history shows of each."""
    return store.rows(
        "SELECT candidate_id, parent_id, iteration, proposer, status, status_reason, rationale, diff, harness_hash,"
        " proposal_trace_id, predictions, prediction_check, liveness FROM candidates WHERE experiment_id = ?"
        " ORDER BY iteration, created_at", [experiment_id])


def candidate_row(store: Store, candidate_id: str) -> dict[str, Any] | None:
    """Every column of one candidate (JSON columns as text), or None."""
    rows = store.rows("SELECT * FROM candidates WHERE candidate_id = ?", [candidate_id])
    return rows[0] if rows else None


def latest_candidate_ids(store: Store, n: int) -> list[str]:
    """The ids of the `n` newest candidates in the store."""
    return [r["candidate_id"] for r in store.rows(
        "SELECT candidate_id FROM candidates ORDER BY created_at DESC LIMIT ?", [n])]


def experiment_summary(store: Store, experiment_id: str) -> dict[str, Any] | None:
    """{experiment_id, benchmark, status, started_at, config (JSON text)}, or None."""
    rows = store.rows("SELECT experiment_id, benchmark, status, started_at, config FROM experiments "
                      "WHERE experiment_id = ?", [experiment_id])
    return rows[0] if rows else None


def experiment_splits(store: Store, experiment_id: str) -> dict[str, list[str]] | None:
    """The experiment's splits, or None for an unknown experiment."""
    rows = store.rows("SELECT splits FROM experiments WHERE experiment_id = ?", [experiment_id])
    if not rows:
        return None
    v = rows[0]["splits"]
    return (json.loads(v) if isinstance(v, str) else v) or {}


def gate_rows(store: Store, experiment_id: str) -> list[dict[str, Any]]:
    """The experiment's gate decisions in the order they were taken (the numbers the history shows)."""
    return store.rows(
        "SELECT candidate_id, stage, outcome, delta, se, threshold, n_tasks, coverage, reason FROM gate_decisions"
        " WHERE experiment_id = ? ORDER BY decided_at", [experiment_id])


def candidate_decisions(store: Store, candidate_id: str) -> list[dict[str, Any]]:
    """{stage, outcome, delta, se, reason} of one candidate's gate decisions, in order."""
    return store.rows("SELECT stage, outcome, delta, se, reason FROM gate_decisions "
                      "WHERE candidate_id = ? ORDER BY decided_at", [candidate_id])


def split_scores(store: Store, candidate_id: str) -> list[dict[str, Any]]:
    """{split, trials, mean_score, errors} of one candidate's trials, per split."""
    return store.rows("SELECT split, count(*) AS trials, avg(score) AS mean_score, "
                      "sum(CASE WHEN status = 'error' THEN 1 ELSE 0 END) AS errors "
                      "FROM trials WHERE candidate_id = ? GROUP BY split ORDER BY split", [candidate_id])


def train_trial_scores(store: Store, experiment_id: str, candidate_id: str | None = None) -> list[dict[str, Any]]:
    """{candidate_id, task_id, score} of the experiment's train trials (one candidate's, or every
    candidate's), by candidate, task and attempt."""
    one = " AND candidate_id = ?" if candidate_id is not None else ""
    return store.rows("SELECT candidate_id, task_id, score FROM trials WHERE experiment_id = ?" + one
                      + " AND split = 'train' ORDER BY candidate_id, task_id, attempt",
                      [experiment_id, *([candidate_id] if candidate_id is not None else [])])


def train_trials(store: Store, experiment_id: str, candidate_id: str, task_id: str) -> list[dict[str, Any]]:
    """{trial_id, attempt, status, score, failure_mode} of one candidate's train trials of one task."""
    return store.rows("SELECT trial_id, attempt, status, score, failure_mode FROM trials WHERE experiment_id = ?"
                      " AND candidate_id = ? AND split = 'train' AND task_id = ? ORDER BY attempt",
                      [experiment_id, candidate_id, task_id])


def trials_per_candidate(store: Store, experiment_id: str) -> dict[str, int]:
    """candidate_id -> trials run for it (every split)."""
    return {r["candidate_id"]: r["n"] for r in store.rows(
        "SELECT candidate_id, count(*) AS n FROM trials WHERE experiment_id = ? GROUP BY 1", [experiment_id])}


def validation_means(store: Store, experiment_id: str) -> dict[str, float]:
    """candidate_id -> the mean over validation tasks of each task's mean scored trial."""
    return {r["candidate_id"]: r["m"] for r in store.rows(
        "SELECT candidate_id, avg(tm) AS m FROM (SELECT candidate_id, task_id, avg(score) AS tm FROM trials"
        " WHERE experiment_id = ? AND split = 'validation' AND score IS NOT NULL GROUP BY 1, 2) GROUP BY 1",
        [experiment_id])}


def next_note_seq(store: Store, experiment_id: str) -> int:
    """The seq the experiment's next notebook entry takes (1, 2, ...)."""
    return store.rows("SELECT coalesce(max(seq), 0) + 1 AS n FROM notebook WHERE experiment_id = ?",
                      [experiment_id])[0]["n"]


_MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0003_experiment_ledger",
        """
        CREATE TABLE experiments (
            experiment_id VARCHAR PRIMARY KEY,
            benchmark VARCHAR NOT NULL,
            config JSON NOT NULL,            -- every option the run was started with
            splits JSON NOT NULL,            -- {train: [task ids], validation: [...], test: [...]}
            status VARCHAR NOT NULL,         -- running | finished | interrupted | failed
            started_at TIMESTAMP NOT NULL,
            finished_at TIMESTAMP,
            result JSON                      -- the final report (the --json object)
        );
        CREATE TABLE candidates (
            candidate_id VARCHAR PRIMARY KEY,
            experiment_id VARCHAR NOT NULL,
            parent_id VARCHAR,
            iteration INTEGER NOT NULL,      -- 0 = the starting harness
            status VARCHAR NOT NULL,         -- baseline | pending | accepted | rejected | inconclusive | invalid
            proposer VARCHAR,
            rationale VARCHAR,
            evidence JSON,                   -- trial ids / span ids the proposal cites
            diff VARCHAR,                    -- unified diff against the parent's harness files
            harness JSON NOT NULL,           -- full snapshot of the harness
            harness_hash VARCHAR NOT NULL,
            status_reason VARCHAR,
            created_at TIMESTAMP NOT NULL
        );
        CREATE TABLE gate_decisions (
            experiment_id VARCHAR NOT NULL,
            candidate_id VARCHAR NOT NULL,
            parent_id VARCHAR,
            stage VARCHAR NOT NULL,          -- smoke | screen | validation
            outcome VARCHAR NOT NULL,        -- pass | fail | accept | reject | inconclusive | stopped
            delta DOUBLE,
            se DOUBLE,
            threshold DOUBLE,
            n_tasks INTEGER,
            coverage DOUBLE,
            reason VARCHAR NOT NULL,
            rule VARCHAR NOT NULL,
            details JSON,
            decided_at TIMESTAMP NOT NULL
        );
        CREATE TABLE budget_ledger (
            experiment_id VARCHAR NOT NULL,
            candidate_id VARCHAR,
            kind VARCHAR NOT NULL,           -- task | meta
            ref VARCHAR,                     -- trial id, or the proposal it paid for
            usd DOUBLE,                      -- NULL when the price is unknown
            input_tokens BIGINT,
            output_tokens BIGINT,
            recorded_at TIMESTAMP NOT NULL
        );
        """,
    ),
    (
        "0004_stats_alpha_and_saved_trials",
        """
        ALTER TABLE gate_decisions ADD COLUMN alpha_spent DOUBLE;  -- experiment alpha this row committed (0: none)
        ALTER TABLE budget_ledger ADD COLUMN trials INTEGER;       -- kind 'saved': validation trials not run
        """,
    ),
    (
        "0006_memory_history",
        # The meta-agent's memory (issue 13) and its traces (issue 12 item 9): the proposal's
        # transcript (an `invoke_agent meta-agent` trace in spans), its falsifiable manifest and
        # the checks run on it, and a notebook it keeps across proposals.
        """
        ALTER TABLE candidates ADD COLUMN proposal_trace_id VARCHAR;  -- trace of the meta-agent session
        ALTER TABLE candidates ADD COLUMN predictions JSON;         -- {cause, fixes: [train task], keeps: [train task]}
        ALTER TABLE candidates ADD COLUMN prediction_check JSON;    -- meta_agent.predictions.PredictionCheck
        ALTER TABLE candidates ADD COLUMN liveness JSON;            -- meta_agent.liveness.Liveness
        CREATE TABLE notebook (
            experiment_id VARCHAR NOT NULL,
            seq INTEGER NOT NULL,            -- 1, 2, ... per experiment, in writing order
            parent_id VARCHAR,               -- the candidate the session was proposing a child of
            trace_id VARCHAR,                -- the meta-agent session that wrote it
            text VARCHAR NOT NULL,
            written_at TIMESTAMP NOT NULL
        );
        """,
    ),
    ("0008_bilevel_mechanisms", """
        ALTER TABLE candidates ADD COLUMN mechanisms JSON;  -- hashes of the active mechanism set
        """,
    ),
)

SCHEMA = Schema(tables=("experiments", "candidates", "gate_decisions", "budget_ledger", "notebook"),
                migrations=_MIGRATIONS, readers=("metaopt.traces.diagnose", "metaopt.explorer.queries",
                                                 "metaopt.explorer.paired", "metaopt.explorer.mechanisms"))
