"""Typed rows (traces.records): the trial record is the `trials` table, JSON round-trippable,
written by column name; the experiment's rows too. And the one registry shape (core.registry)."""

from __future__ import annotations

from datetime import datetime
from importlib.metadata import EntryPoint

import pytest

from metaopt.core.errors import MissingExtra, UnknownName, UserError
from metaopt.core.registry import Registry
from metaopt.evaluation import TrialResult
from metaopt.meta_agent.records import Candidate, GateDecision, Spend
from metaopt.task_agent.harness_io import load_harness, resolve_harness
from metaopt.traces.records import Record
from metaopt.traces.store import Store

FULL = TrialResult(
    trial_id="r/t/0", run_id="r", benchmark="b", task_id="t", attempt=0, agent="h@fake/nop", score=0.5,
    status="failed", failure_mode="tests_failed", error="x", tests={"a": "passed", "b": "failed"},
    rewards={"soft": 0.5, "hard": 0.0}, test_output="out", verifier_exit_code=1, agent_timed_out=False,
    agent_log="log", duration_s=1.5, agent_duration_s=1.0, verifier_duration_s=0.4, image="img", timeout_multiplier=1.0,
    input_tokens=10, output_tokens=5, cost_usd=None, trace_id="ab" * 16, hardware={"cpus": 2, "machine": "x86_64"},
    started_at=datetime(2026, 12, 1, 9, 0, 0), finished_at=datetime(2026, 12, 1, 9, 0, 2), experiment_id="e",
    candidate_id="e/c1", split="validation")


def test_a_trial_result_survives_json_unchanged():
    assert TrialResult.model_validate_json(FULL.model_dump_json()) == FULL


def test_the_trial_record_is_the_trials_table(tmp_path):
    with Store(tmp_path / "s.duckdb") as s:
        assert set(s.columns("trials")) == set(TrialResult.model_fields)
        s.insert(FULL)
        [back] = s.select(TrialResult, "trial_id = ?", ["r/t/0"])
    assert back == FULL


def test_a_misspelt_field_fails_loudly():
    with pytest.raises(ValueError, match="scroe"):
        TrialResult(**{**FULL.model_dump(), "scroe": 1.0})


def test_a_record_field_that_is_not_a_column_is_refused_by_the_store(tmp_path):
    class Bad(Record, table="budget_ledger"):
        experiment_id: str
        no_such_column: int = 1

    with Store(tmp_path / "s.duckdb") as s, pytest.raises(Exception, match="no_such_column"):
        s.insert(Bad(experiment_id="e"))


def test_ledger_rows_round_trip(tmp_path):
    h = load_harness(resolve_harness("minimal"))
    now = datetime(2026, 12, 1, 10, 0, 0)
    rows = [Candidate(candidate_id="e/c0", experiment_id="e", iteration=0, status="baseline", harness=h,
                      harness_hash=h.content_hash(), created_at=now, evidence=["t1"]),
            GateDecision(experiment_id="e", candidate_id="e/c1", stage="screen", outcome="pass", reason="r", rule="x",
                         details={"t": 0.5}, decided_at=now),
            Spend(experiment_id="e", kind="meta", usd=None, recorded_at=now)]
    with Store(tmp_path / "s.duckdb") as s:
        for r in rows:
            s.insert(r)
        back = [s.select(type(r))[0] for r in rows]
    assert back == rows and back[0].harness.content_hash() == h.content_hash()


def test_registry_lookup_lists_the_known_names_and_plugins_cannot_replace_builtins(monkeypatch):
    reg = Registry("widget", "metaopt.widgets", {"json": "json:dumps"})
    assert reg.load("json") is __import__("json").dumps
    with pytest.raises(UnknownName, match=r"unknown widget 'yaml' \(known: json\)") as e:
        reg.load("yaml")
    assert isinstance(e.value, UserError)
    plugins = [EntryPoint("json", "os:getcwd", "metaopt.widgets"), EntryPoint("cwd", "os:getcwd", "metaopt.widgets")]
    monkeypatch.setattr("metaopt.core.registry.entry_points", lambda group: [p for p in plugins if p.group == group])
    assert reg.names() == ["json", "cwd"] and reg.load("json") is __import__("json").dumps
    assert reg.load("cwd") is __import__("os").getcwd


def test_a_missing_extra_names_what_to_install():
    e = MissingExtra("benchmark 'gptpretrain'", "pretrain", "numpy")
    assert e.line() == ("benchmark 'gptpretrain' needs the 'pretrain' extra (numpy is not installed): "
                        "pip install 'metaopt[pretrain]'")
    assert UserError("bad\nmore", field="--x").line() == "--x: bad"
