"""TrialResult: one trial, exactly the `trials` table (traces/migrations.py), typed.

A trial is one (run, task, attempt). The trial runner builds it, the store writes it by column
name, readers get it back typed, and it is JSON round-trippable, so it can come back from another
process or machine unchanged: `TrialResult.model_validate_json(r.model_dump_json()) == r`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from metaopt.traces.records import Record

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
