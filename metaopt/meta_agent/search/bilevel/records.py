"""Owner of the bilevel strategy's tables (migration 0008_bilevel_mechanisms): their DDL, records and
queries (tests/test_table_owners.py). The rows: every
mechanism with its source, each ladder step, every hook call with what it returned and what it
did, the active set over time (rollback = a new row pointing back at earlier hashes), Level 1.5's
search parameters, Level 2's conversations and the judgement of each generated mechanism."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from metaopt.meta_agent.search.bilevel.static import CheckStep
from metaopt.traces.migrations import Schema
from metaopt.traces.records import Record
from metaopt.traces.store import Store, now

SessionOutcome = Literal["module", "spec_error", "code_error", "model_error"]

MechanismStatus = Literal["builtin", "validating", "refused", "on_trial", "kept", "rolled_back", "off"]


class MechanismRow(Record, table="mechanisms"):
    experiment_id: str
    mechanism_hash: str
    """sha256 of the source: the mechanism's identity."""
    name: str
    origin: Literal["builtin", "generated"]
    source: str
    spec: dict[str, Any] | None = None
    """The Level-2 session's Specify object (generated mechanisms)."""
    session_id: str | None = None
    status: MechanismStatus
    status_reason: str | None = None
    trial: dict[str, Any] | None = None
    """The judgement plan: {"start": iteration, "window": W, "order": ["on", "off", ...]}."""
    created_at: datetime
    updated_at: datetime


class MechanismCheck(Record, table="mechanism_checks"):
    experiment_id: str
    mechanism_hash: str
    step: CheckStep
    attempt: int = 1
    ok: bool
    reason: str
    detail: dict[str, Any] = Field(default_factory=dict)
    checked_at: datetime


class HookCall(Record, table="mechanism_calls"):
    experiment_id: str
    iteration: int
    candidate_id: str | None = None
    """The candidate the call was for (the one about to be proposed, or just decided)."""
    mechanism_hash: str
    mechanism: str
    hook: str
    status: Literal["ok", "raised", "timeout", "garbage", "dead", "skipped"]
    output: str | None = None
    """The returned value as JSON text."""
    error: str | None = None
    effect: str | None = None
    """What the output did: shown to the proposer, picked the parent, dropped the revision, ..."""
    state: dict[str, Any] | None = None
    """state_dict() after an on_result (what a resume restores)."""
    ms: float = 0.0
    called_at: datetime


class ActiveSet(Record, table="mechanism_active_sets"):
    experiment_id: str
    iteration: int
    """First iteration the set applies to."""
    hashes: list[str]
    reason: str
    changed_at: datetime


class SearchParams(Record, table="search_params"):
    experiment_id: str
    iteration: int
    params: dict[str, Any]
    """{"favour": [...], "freeze": {area: until_iteration}, "explore_rate": x, "guidance": str | None}."""
    reason: str
    decided_at: datetime


class Judgement(Record, table="mechanism_judgements"):
    experiment_id: str
    mechanism_hash: str
    iteration: int
    outcome: Literal["keep", "roll_back", "undecided"]
    rule: str
    reason: str
    windows: list[dict[str, Any]] = Field(default_factory=list)
    """Each window: {"phase": "on"|"off", "pair": j, "iterations": [...], "gain": g, "trials": n, "rate": g/n}."""
    n_pairs: int = 0
    mean_diff: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    judged_at: datetime


class Level2Session(Record, table="level2_sessions"):
    session_id: str
    experiment_id: str
    round: int
    iteration: int
    model: str
    outcome: SessionOutcome
    errors: list[str] = Field(default_factory=list)
    spec: dict[str, Any] | None = None
    mechanism_hash: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    """The whole conversation: [{"role", "text"}, ...]."""
    usd: float = 0.0
    started_at: datetime
    finished_at: datetime


# -- writes and queries -----------------------------------------------------------------------------
def set_mechanism_status(store: Store, eid: str, h: str, status: str, reason: str | None,
                         trial: dict[str, Any] | None = None) -> None:
    """A mechanism's new status (and judgement plan, when given)."""
    sql = "UPDATE mechanisms SET status = ?, status_reason = ?, updated_at = ?"
    params: list[Any] = [status, reason, now()]
    if trial is not None:
        sql, params = sql + ", trial = ?", params + [json.dumps(trial)]
    store.con.execute(sql + " WHERE experiment_id = ? AND mechanism_hash = ?", params + [eid, h])


def last_state(store: Store, eid: str, h: str) -> dict[str, Any] | None:
    """The state a mechanism's last successful state_dict() call returned."""
    rows = store.rows("SELECT state FROM mechanism_calls WHERE experiment_id = ? AND mechanism_hash = ? "
                      "AND hook = 'state_dict' AND status = 'ok' ORDER BY called_at DESC LIMIT 1", [eid, h])
    return json.loads(rows[0]["state"]) if rows and rows[0]["state"] else None


def set_active_at(store: Store, eid: str, hashes: list[str], before: datetime) -> int | None:
    """The first iteration of the latest active set equal to `hashes` recorded by `before`."""
    rows = store.rows("SELECT iteration FROM mechanism_active_sets WHERE experiment_id = ? AND "
                      "hashes = ?::JSON AND changed_at <= ? ORDER BY changed_at DESC LIMIT 1",
                      [eid, json.dumps(hashes), before])
    return rows[0]["iteration"] if rows else None


def level2_rounds(store: Store, eid: str) -> tuple[int, int | None]:
    """(Level-2 sessions so far, the iteration of the last one)."""
    r = store.rows("SELECT count(*) AS n, max(iteration) AS last FROM level2_sessions WHERE experiment_id = ?",
                   [eid])[0]
    return r["n"], r["last"]


def level2_history(store: Store, eid: str) -> list[dict[str, Any]]:
    """{round, iteration, outcome, errors, spec (JSON text)} of every Level-2 session, in order."""
    return store.rows("SELECT round, iteration, outcome, errors, spec FROM level2_sessions WHERE experiment_id = ? "
                      "ORDER BY round", [eid])


def recent_search_params(store: Store, eid: str, n: int) -> list[dict[str, Any]]:
    """{iteration, params (JSON text), reason} of the last `n` Level-1.5 decisions, newest first."""
    return store.rows("SELECT iteration, params, reason FROM search_params WHERE experiment_id = ? "
                      "ORDER BY iteration DESC LIMIT ?", [eid, n])


def mechanism_summaries(store: Store, eid: str) -> list[dict[str, Any]]:
    """{mechanism_hash, name, origin, status, status_reason} of the experiment's mechanisms, oldest first."""
    return store.rows("SELECT mechanism_hash, name, origin, status, status_reason FROM mechanisms "
                      "WHERE experiment_id = ? ORDER BY created_at", [eid])


def hook_call_counts(store: Store, eid: str) -> dict[tuple[str, str, str], int]:
    """(mechanism_hash, hook, status) -> calls."""
    return {(r["mechanism_hash"], r["hook"], r["status"]): r["n"] for r in store.rows(
        "SELECT mechanism_hash, hook, status, count(*) AS n FROM mechanism_calls WHERE experiment_id = ? "
        "GROUP BY 1, 2, 3", [eid])}


def recent_effects(store: Store, eid: str, n: int) -> list[dict[str, Any]]:
    """{mechanism_hash, iteration, hook, effect} of the last `n` successful calls that did something."""
    return store.rows("SELECT mechanism_hash, iteration, hook, effect FROM mechanism_calls WHERE experiment_id = ?"
                      " AND effect IS NOT NULL AND status = 'ok' ORDER BY iteration DESC LIMIT ?", [eid, n])


def judgement_outcomes(store: Store, eid: str) -> dict[str, dict[str, Any]]:
    """mechanism_hash -> {mechanism_hash, outcome, reason} of its judgement."""
    return {r["mechanism_hash"]: r for r in store.rows(
        "SELECT mechanism_hash, outcome, reason FROM mechanism_judgements WHERE experiment_id = ?", [eid])}


_MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0008_bilevel_mechanisms",
        """
        CREATE TABLE mechanisms (
            experiment_id VARCHAR NOT NULL,
            mechanism_hash VARCHAR NOT NULL,  -- sha256 of the source
            name VARCHAR NOT NULL,
            origin VARCHAR NOT NULL,          -- builtin | generated
            source VARCHAR NOT NULL,
            spec JSON,                        -- the Level-2 Specify object
            session_id VARCHAR,
            status VARCHAR NOT NULL,          -- builtin | validating | refused | on_trial | kept | rolled_back | off
            status_reason VARCHAR,
            trial JSON,                       -- judgement plan: windows and their order
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL,
            PRIMARY KEY (experiment_id, mechanism_hash)
        );
        CREATE TABLE mechanism_checks (
            experiment_id VARCHAR NOT NULL,
            mechanism_hash VARCHAR NOT NULL,
            step VARCHAR NOT NULL,            -- parse | imports | contract | dry_run
            attempt INTEGER NOT NULL,
            ok BOOLEAN NOT NULL,
            reason VARCHAR NOT NULL,
            detail JSON,
            checked_at TIMESTAMP NOT NULL
        );
        CREATE TABLE mechanism_calls (
            experiment_id VARCHAR NOT NULL,
            iteration INTEGER NOT NULL,
            candidate_id VARCHAR,
            mechanism_hash VARCHAR NOT NULL,
            mechanism VARCHAR NOT NULL,
            hook VARCHAR NOT NULL,
            status VARCHAR NOT NULL,          -- ok | raised | timeout | garbage | dead | skipped
            output JSON,
            error VARCHAR,
            effect VARCHAR,
            state JSON,
            ms DOUBLE,
            called_at TIMESTAMP NOT NULL
        );
        CREATE TABLE mechanism_active_sets (
            experiment_id VARCHAR NOT NULL,
            iteration INTEGER NOT NULL,
            hashes JSON NOT NULL,
            reason VARCHAR NOT NULL,
            changed_at TIMESTAMP NOT NULL
        );
        CREATE TABLE search_params (
            experiment_id VARCHAR NOT NULL,
            iteration INTEGER NOT NULL,
            params JSON NOT NULL,
            reason VARCHAR NOT NULL,
            decided_at TIMESTAMP NOT NULL
        );
        CREATE TABLE mechanism_judgements (
            experiment_id VARCHAR NOT NULL,
            mechanism_hash VARCHAR NOT NULL,
            iteration INTEGER NOT NULL,
            outcome VARCHAR NOT NULL,         -- keep | roll_back | undecided
            rule VARCHAR NOT NULL,
            reason VARCHAR NOT NULL,
            windows JSON,
            n_pairs INTEGER,
            mean_diff DOUBLE,
            ci_low DOUBLE,
            ci_high DOUBLE,
            judged_at TIMESTAMP NOT NULL
        );
        CREATE TABLE level2_sessions (
            session_id VARCHAR PRIMARY KEY,
            experiment_id VARCHAR NOT NULL,
            round INTEGER NOT NULL,
            iteration INTEGER NOT NULL,
            model VARCHAR NOT NULL,
            outcome VARCHAR NOT NULL,         -- module | spec_error | code_error | model_error
            errors JSON,
            spec JSON,
            mechanism_hash VARCHAR,
            messages JSON,
            usd DOUBLE,
            started_at TIMESTAMP NOT NULL,
            finished_at TIMESTAMP NOT NULL
        );
        """,
    ),
)

SCHEMA = Schema(tables=("mechanisms", "mechanism_checks", "mechanism_calls", "mechanism_active_sets", "search_params",
                        "mechanism_judgements", "level2_sessions"), migrations=_MIGRATIONS,
                readers=("metaopt.explorer.mechanisms",))
