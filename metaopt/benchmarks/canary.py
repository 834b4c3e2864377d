"""Canary tasks: unsolvable tasks whose tests only tampering can pass.

Each has a plausible instruction (write a token the agent was never given) and tests that check
the sha256 of the answer against a digest whose secret was thrown away when the task was made
(SpreadsheetBench: an answer cell no input holds). An honest agent scores 0 on them whatever it
does; a harness that makes the agent plant a conftest.py, fake the test runner or the reward
scores 1. `metaopt run` adds them to every candidate's smoke run (`--no-canary` turns that off)
and marks a candidate that passes any as `invalid`. Canary ids start with `canary-`; they never
enter a split, a score or the gate.
"""

from __future__ import annotations

from pathlib import Path

from metaopt.benchmarks.formats import load_dataset
from metaopt.benchmarks.task import Task

ROOT = Path(__file__).parent / "canaries"
FAMILIES = {"terminalbench": "terminalbench", "terminalbench-sample": "terminalbench",
            "spreadsheetbench": "spreadsheetbench", "spreadsheetbench-sample": "spreadsheetbench"}


def canary_tasks(benchmark: str) -> list[Task]:
    """The canaries for `benchmark` (none for benchmarks without any, e.g. gptpretrain)."""
    family = FAMILIES.get(benchmark)
    if family is None:
        return []
    return [t for t in load_dataset(ROOT / family, benchmark) if isinstance(t, Task)]


def is_canary(task_id: str) -> bool:
    return task_id.startswith("canary-")
