"""TrialResult: one trial, exactly the `trials` table, typed (defined with its table in traces.tables).

A trial is one (run, task, attempt). The trial runner builds it, the store writes it by column
name, readers get it back typed, and it is JSON round-trippable, so it can come back from another
process or machine unchanged: `TrialResult.model_validate_json(r.model_dump_json()) == r`.
"""

from __future__ import annotations

from metaopt.traces.tables import Status, TrialResult

__all__ = ["Status", "TrialResult"]
