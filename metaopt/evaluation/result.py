"""TrialResult: one trial, exactly the `trials` table, typed (defined with its table in traces.tables).

A trial is one (run, task, attempt). The trial runner builds it, the store writes it by column
name, readers get it back typed, and it is JSON round-trippable, so it can come back from another
process or machine unchanged: `TrialResult.model_validate_json(r.model_dump_json()) == r`.
"""

from __future__ import annotations

from typing import Any

from metaopt.traces.tables import Status, TrialResult

__all__ = ["Status", "TrialResult", "trial_row"]


def trial_row(run_id: str, task_id: str, attempt: int, **fields: Any) -> TrialResult:
    """A trial's row, the one way it is made (the trial runner, an executor's error for a trial
    it could not place, an imported Harbor job): its id from (run, task, attempt), the rest as given."""
    return TrialResult(trial_id=f"{run_id}/{task_id}/{attempt}", run_id=run_id, task_id=task_id, attempt=attempt,
                       **fields)
