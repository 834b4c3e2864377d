"""Owner of the tables `runs`, `trials`, `spans` and `messages`: their DDL (the traces part of the
named migrations), their records and every write to them (tests/test_table_owners.py).

Trials are written by `Store.insert(TrialResult)`; runs by `Store.begin_run` / `end_run`, which
come here; spans and messages by the span exporter (traces.exporter), which builds positional
rows in `SpanRecord` / `MessageRecord` column order and appends them here in one transaction.
Reads are in traces.queries and the readers SCHEMA names (the explorer's among them).
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from typing import Any, Literal

import duckdb
from pydantic import ConfigDict, Field

from metaopt.traces.migrations import Schema
from metaopt.traces.records import Record

RunStatus = Literal["running", "finished", "interrupted", "failed"]


class RunRecord(Record, table="runs"):
    """One `metaopt eval` run, an experiment's run of a split, or a mechanism host's."""

    run_id: str
    benchmark: str
    agent: str
    """oracle | nop | harness@model."""
    dataset: str | None = None
    args: dict[str, Any] | None = None
    """The options the run was started with."""
    started_at: datetime
    finished_at: datetime | None = None
    status: RunStatus


Status = Literal["passed", "failed", "timeout", "error", "tampered"]
"""`tampered`: the agent changed what the verifier runs, or the reward contradicts the
verifier's own output (score 0, never NULL; evidence in `tamper_evidence`)."""


class TrialResult(Record, table="trials"):
    """What one trial did and how it was scored. Score is in [0, 1], higher is better; it is None
    exactly when the trial is an error (errors are not zeros: they lower coverage)."""

    trial_id: str
    """`{run_id}/{task_id}/{attempt}`: the key; a resumed run never runs it again."""
    run_id: str
    benchmark: str
    task_id: str
    attempt: int
    """0-based trial index of this task in the run."""
    agent: str
    """oracle | nop | harness@model."""
    score: float | None = None
    status: Status
    failure_mode: str | None = None
    """agent_timeout | test_timeout | tests_failed | parse_error | infra_error | agent_error | ..."""
    error: str | None = None
    tests: dict[str, str] | None = None
    """Per-test results parsed from the verifier: {test id: passed | failed}."""
    rewards: dict[str, float] | None = None
    """Reward values (Harbor reward files, spreadsheet soft/hard, val_bpb figures, inspect scores)."""
    test_output: str | None = None
    """The verifier's stdout and stderr (head and tail kept)."""
    verifier_exit_code: int | None = None
    agent_timed_out: bool | None = None
    agent_log: str | None = None
    duration_s: float | None = None
    agent_duration_s: float | None = None
    verifier_duration_s: float | None = None
    image: str | None = None
    timeout_multiplier: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    """NULL when the price is unknown (never guessed as 0)."""
    trace_id: str | None = None
    """The agent's trace in `spans` (None for agents that are not traced)."""
    hardware: dict[str, Any] | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    experiment_id: str | None = None
    candidate_id: str | None = None
    split: str | None = None
    """train | validation | test | smoke, for trials of an experiment."""
    infra_errors: list[dict[str, Any]] | None = None
    """Infrastructure failures before this attempt (a Ray worker or node that died, a node
    without a Docker daemon): [{node, ray_node_id, error, after_s}]; None when there were none."""
    tamper_evidence: list[dict[str, Any]] | None = None
    """Why a trial is `tampered`: [{rule, path, change, detail, sha256, pristine_sha256}]."""
    integrity: dict[str, Any] | None = None
    """What the integrity steps did: processes stopped or kept, scan size and time, the pristine
    re-check, the raw verdict of a tampered trial."""

    @property
    def scored(self) -> bool:
        return self.score is not None


class SpanRecord(Record, table="spans"):
    """One OpenTelemetry span. Spans join trials by trace_id (trials.trace_id) or trial_id."""

    trace_id: str
    """32 hex."""
    span_id: str
    """16 hex."""
    parent_span_id: str | None = None
    """None for a root span."""
    name: str
    kind: str | None = None
    """INTERNAL | CLIENT | SERVER | PRODUCER | CONSUMER."""
    start_ns: int | None = None
    end_ns: int | None = None
    duration_ms: float | None = None
    status_code: str | None = None
    """UNSET | OK | ERROR."""
    status_message: str | None = None
    service_name: str | None = None
    scope_name: str | None = None
    run_id: str | None = None
    """metaopt.run.id."""
    trial_id: str | None = None
    """metaopt.trial.id."""
    task_id: str | None = None
    """metaopt.task.id."""
    harness_version: str | None = None
    """gen_ai.agent.version."""
    operation_name: str | None = None
    """invoke_agent | chat | execute_tool | ..."""
    provider: str | None = None
    request_model: str | None = None
    response_model: str | None = None
    agent_name: str | None = None
    conversation_id: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    input_tokens: int | None = None
    """Includes cached tokens."""
    output_tokens: int | None = None
    """Includes reasoning tokens."""
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    finish_reasons: list[str] | None = None
    """A list column, not JSON."""
    error_type: str | None = None
    cost_usd: float | None = None
    """metaopt.cost_usd; None when unknown."""
    attributes: dict[str, Any] | None = None
    """Every attribute (hot ones too) but the content, which is in messages."""
    resource: dict[str, Any] | None = None
    events: list[dict[str, Any]] | None = None
    """[{name, ts_ns, attributes}]."""

    @classmethod
    def json_fields(cls) -> frozenset[str]:
        return frozenset({"attributes", "resource", "events"})


class MessageRecord(Record, table="messages"):
    """One part of a message a span carried (its system instructions, input, output, tool call or result)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, populate_by_name=True)
    trace_id: str
    span_id: str
    trial_id: str | None = None
    direction: Literal["input", "output", "system", "tool_call", "tool_result"]
    idx: int | None = None
    """Position in the conversation (system excluded)."""
    role: str | None = None
    part_idx: int | None = None
    part_type: str | None = None
    """text | reasoning | tool_call | tool_call_response | ..."""
    text: str | None = None
    """Searchable text of the part (arguments as JSON)."""
    tool_call_id: str | None = None
    tool_name: str | None = None
    part: dict[str, Any] | None = Field(default=None, alias="json")
    """The part as emitted (column `json`)."""


SPAN_COLUMNS = SpanRecord.columns()
MESSAGE_COLUMNS = MessageRecord.columns()


# -- writes ------------------------------------------------------------------------------------
def begin_run(con: duckdb.DuckDBPyConnection, run: RunRecord) -> None:
    """Insert `run`, or mark it running again when it is resumed."""
    con.execute(
        "INSERT INTO runs (run_id, benchmark, agent, dataset, args, started_at, status) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (run_id) DO UPDATE SET status = 'running', finished_at = NULL",
        [run.run_id, run.benchmark, run.agent, run.dataset, json.dumps(run.args, default=str), run.started_at,
         run.status])


def end_run(con: duckdb.DuckDBPyConnection, run_id: str, status: str, at: datetime, *,
            unless_finished: bool = False) -> None:
    """Close a run; `unless_finished` leaves a run already finished as it is."""
    con.execute("UPDATE runs SET finished_at = ?, status = ? WHERE run_id = ?"
                + (" AND status <> 'finished'" if unless_finished else ""), [at, status, run_id])


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, cols: tuple[str, ...], rows: list[list[Any]]) -> None:
    """Bulk-insert rows exported from a store (`cols` named, one statement) into one of this
    module's tables; a recorded case's evidence is loaded so."""
    if table not in SCHEMA.tables:
        raise ValueError(f"{table} is not a traces table")
    names = ", ".join(f'"{c}"' for c in cols)
    con.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(cols))})", rows)


def check_span_columns(cur: duckdb.DuckDBPyConnection) -> None:
    """The appender is positional: a schema drift must fail loudly. Raises RuntimeError."""
    cols = [r[0] for r in cur.execute("DESCRIBE spans").fetchall()]
    if cols != SPAN_COLUMNS:
        raise RuntimeError(f"spans table columns {cols} do not match the exporter's")


def append_spans(cur: duckdb.DuckDBPyConnection, spans: list[list[Any]], messages: list[list[Any]]) -> None:
    """Write positional span and message rows (SPAN_COLUMNS / MESSAGE_COLUMNS order) in one
    transaction; on an error nothing is written and the error is raised."""
    cur.execute("BEGIN TRANSACTION")
    try:
        for table, data in (("spans", spans), ("messages", messages)):
            if data:
                ap = cur.appender(table)
                ap.append_rows(data)
                ap.flush()
        cur.execute("COMMIT")
    except Exception:
        with contextlib.suppress(Exception):
            cur.execute("ROLLBACK")
        raise


_MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_runs_and_trials",
        """
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY,
            benchmark VARCHAR NOT NULL,
            agent VARCHAR NOT NULL,          -- oracle | nop | harness@model
            dataset VARCHAR,
            args JSON,
            started_at TIMESTAMP NOT NULL,
            finished_at TIMESTAMP,
            status VARCHAR NOT NULL          -- running | finished | interrupted | failed
        );
        CREATE TABLE trials (
            trial_id VARCHAR PRIMARY KEY,
            run_id VARCHAR NOT NULL,
            benchmark VARCHAR NOT NULL,
            task_id VARCHAR NOT NULL,
            attempt INTEGER NOT NULL,        -- 0-based trial index for this task in the run
            agent VARCHAR NOT NULL,
            score DOUBLE,                    -- NULL when status = error: errors are not zeros
            status VARCHAR NOT NULL,         -- passed | failed | error | timeout
            failure_mode VARCHAR,            -- agent_timeout | test_timeout | tests_failed | parse_error | infra_error | ...
            error VARCHAR,
            tests JSON,                      -- {test id: passed | failed}
            rewards JSON,                    -- Harbor reward.json / reward.txt values
            test_output VARCHAR,
            verifier_exit_code INTEGER,
            agent_timed_out BOOLEAN,
            agent_log VARCHAR,
            duration_s DOUBLE,
            agent_duration_s DOUBLE,
            verifier_duration_s DOUBLE,
            image VARCHAR,
            timeout_multiplier DOUBLE,
            input_tokens BIGINT,
            output_tokens BIGINT,
            cost_usd DOUBLE,
            trace_id VARCHAR,
            hardware JSON,
            started_at TIMESTAMP,
            finished_at TIMESTAMP
        );
        """,
    ),
    (
        "0002_spans_and_messages",
        # Spans join trials by trace_id (trials.trace_id) or trial_id. No PRIMARY KEY and no
        # indexes: an ART index costs the appender more than it saves at our sizes, where zone
        # maps on the append-ordered trace_id/trial_id columns already prune well.
        """
        CREATE TABLE spans (
            trace_id VARCHAR NOT NULL,       -- 32 hex
            span_id VARCHAR NOT NULL,        -- 16 hex
            parent_span_id VARCHAR,          -- NULL for a root span
            name VARCHAR NOT NULL,
            kind VARCHAR,                    -- INTERNAL | CLIENT | SERVER | PRODUCER | CONSUMER
            start_ns BIGINT,
            end_ns BIGINT,
            duration_ms DOUBLE,
            status_code VARCHAR,             -- UNSET | OK | ERROR
            status_message VARCHAR,
            service_name VARCHAR,
            scope_name VARCHAR,
            run_id VARCHAR,                  -- metaopt.run.id
            trial_id VARCHAR,                -- metaopt.trial.id
            task_id VARCHAR,                 -- metaopt.task.id
            harness_version VARCHAR,         -- gen_ai.agent.version
            operation_name VARCHAR,          -- invoke_agent | chat | execute_tool | ...
            provider VARCHAR,
            request_model VARCHAR,
            response_model VARCHAR,
            agent_name VARCHAR,
            conversation_id VARCHAR,
            tool_name VARCHAR,
            tool_call_id VARCHAR,
            input_tokens BIGINT,             -- includes cached tokens
            output_tokens BIGINT,            -- includes reasoning tokens
            reasoning_tokens BIGINT,
            cache_read_tokens BIGINT,
            cache_write_tokens BIGINT,
            finish_reasons VARCHAR[],
            error_type VARCHAR,
            cost_usd DOUBLE,                 -- metaopt.cost_usd; NULL when unknown
            attributes JSON,                 -- every attribute (hot ones too) but the content, which is in messages
            resource JSON,
            events JSON                      -- [{name, ts_ns, attributes}]
        );
        CREATE TABLE messages (
            trace_id VARCHAR NOT NULL,
            span_id VARCHAR NOT NULL,
            trial_id VARCHAR,
            direction VARCHAR NOT NULL,      -- input | output | system | tool_call | tool_result
            idx INTEGER,                     -- position in the conversation (system excluded)
            role VARCHAR,
            part_idx INTEGER,
            part_type VARCHAR,               -- text | reasoning | tool_call | tool_call_response | ...
            text VARCHAR,                    -- searchable text of the part (arguments as JSON)
            tool_call_id VARCHAR,
            tool_name VARCHAR,
            json JSON                        -- the part as emitted
        );
        """,
    ),
    ("0003_experiment_ledger", """
        ALTER TABLE trials ADD COLUMN experiment_id VARCHAR;
        ALTER TABLE trials ADD COLUMN candidate_id VARCHAR;
        ALTER TABLE trials ADD COLUMN split VARCHAR;
        """,
    ),
    (
        "0005_scale_infra_errors",
        # A trial whose worker or node died is dispatched again (evaluation.ray_executor); each
        # failure before the recorded attempt is kept: [{node, ray_node_id, error, after_s}].
        """
        ALTER TABLE trials ADD COLUMN infra_errors JSON;
        """,
    ),
    (
        "0007_integrity_tamper_evidence",
        # status gains `tampered` (score 0): what the verifier would run was changed, or the
        # reward contradicts the verifier's own output. Evidence: [{rule, path, change, detail,
        # sha256, pristine_sha256}]; integrity: what the runner checked (stop, scan, pristine re-check).
        """
        ALTER TABLE trials ADD COLUMN tamper_evidence JSON;
        ALTER TABLE trials ADD COLUMN integrity JSON;
        """,
    ),
)

SCHEMA = Schema(tables=("runs", "trials", "spans", "messages"), migrations=_MIGRATIONS,
                readers=("metaopt.traces.queries", "metaopt.traces.diagnose", "metaopt.meta_agent.records",
                         "metaopt.explorer.queries", "metaopt.explorer.paired"))
