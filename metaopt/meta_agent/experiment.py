"""Start or resume an experiment: everything `metaopt run` does before the loop, as library calls.

    parts = assemble(cfg, db)                  # meta_agent.parts: the store, backend, executor, tracing, proposer
    exp = open_experiment(plan_experiment(cfg, "minimal"), parts)
    exp = open_experiment(find_experiment(db, "exp-..."), parts)      # a resume
    report = exp.run()
    parts.close()

start_experiment and resume_experiment take the parts as keywords (tests, perf scripts).

A resumed experiment runs with the config it was started with (stored in `experiments.config`),
first removes the containers its interrupted runs left, and re-runs nothing that finished.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from metaopt.benchmarks.registry import load_benchmark, with_gpus
from metaopt.benchmarks.task import Task
from metaopt.core.errors import StoreError, UserError
from metaopt.meta_agent import canaries, records
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.ledger import Ledger
from metaopt.meta_agent.optimize import Experiment
from metaopt.meta_agent.parts import Parts
from metaopt.meta_agent.records import ExperimentRecord
from metaopt.meta_agent.splits import split_tasks
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.harness_io import load_harness, resolve_harness
from metaopt.traces.store import Store


def new_experiment_id() -> str:
    return f"exp-{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def load_tasks(cfg: RunConfig) -> list:
    return with_gpus(load_benchmark(cfg.benchmark, Path(cfg.dataset) if cfg.dataset else None, cfg.tasks), cfg.gpus)


@dataclass(frozen=True)
class Plan:
    """A checked experiment, not started yet: nothing is written until start_experiment."""

    cfg: RunConfig
    harness_name: str
    start: Harness
    tasks: list
    splits: dict[str, list[str]]


def plan_experiment(cfg: RunConfig, harness: str, tasks: list | None = None) -> Plan:
    """Check and load everything a new experiment needs: the harness (a folder or shipped name),
    the tasks (default: cfg's benchmark) and their split. Raises UserError; writes nothing."""
    try:
        start = load_harness(resolve_harness(harness))
    except UserError as e:
        e.field = e.field or "--harness"
        raise
    tasks = load_tasks(cfg) if tasks is None else tasks
    splits = split_tasks([t.id for t in tasks if isinstance(t, Task)], cfg.seed, cfg.split)
    return Plan(cfg, harness, start, tasks, splits)


def start_experiment(plan: Plan, *, store: Store, experiment_id: str | None = None, **kw: Any) -> Experiment:
    """Record `plan` as a new experiment in `store` and return it, ready to run. `experiment_id`:
    a fixed id (trial ids derive from it; e.g. to replay a fake/flaky experiment exactly). `kw`:
    the other Parts (backend, tracing, executor, proposer, on_event, on_trial)."""
    return open_experiment(plan, Parts(store, **kw), experiment_id)


def open_experiment(plan: Plan | ExperimentRecord, parts: Parts, experiment_id: str | None = None) -> Experiment:
    """A new experiment recorded from `plan` in `parts.store`, or the interrupted one `plan` is the
    record of (find_experiment; see resume_experiment), ready to run with `parts` (assemble)."""
    if isinstance(plan, ExperimentRecord):
        return _resumed(plan, parts)
    store, exp_id = parts.store, experiment_id or new_experiment_id()
    config: dict[str, Any] = {"run": plan.cfg.model_dump(mode="json"), "harness": plan.harness_name}
    if plan.cfg.canary:  # which tasks are canaries is known only here: recorded with the experiment
        config["canaries"] = canaries.pick(plan.cfg, plan.tasks, plan.splits, exp_id, store)
    Ledger(store, exp_id).create(plan.cfg.benchmark, config, plan.splits)
    return Experiment(plan.cfg, exp_id, plan.tasks, plan.splits, plan.start, parts)


def find_experiment(db: Path, experiment_id: str) -> ExperimentRecord:
    """The experiment's record, read without migrating or writing the store. Raises UserError."""
    if not Path(db).exists():
        raise UserError(f"no store at {db}", field="--resume")
    with Store(db, read_only=True) as probe:
        has = probe.has_table("experiments")
        record = Ledger(probe, experiment_id).experiment() if has else None
    if record is None:
        raise UserError(f"no experiment '{experiment_id}' in {db}", field="--resume")
    return record


def resume_experiment(record: ExperimentRecord, *, store: Store, backend: Any, tasks: list | None = None,
                      **kw: Any) -> Experiment:
    """The interrupted experiment `record`, ready to run on: its leftover containers are removed
    first (every run of it that did not finish), then it goes on with its stored config (and
    `tasks`, when it was started on a task list of its own). `kw`: the other Parts."""
    return _resumed(record, Parts(store, backend, **kw), tasks)


def _resumed(record: ExperimentRecord, parts: Parts, tasks: list | None = None) -> Experiment:
    cfg = RunConfig.model_validate(record.config["run"])
    if record.status == "finished":
        raise StoreError(f"experiment {record.experiment_id} is finished; nothing to resume")
    executor = parts.executor  # a cluster's containers are on its nodes: each node cleans its own
    for run_id in records.unfinished_runs(parts.store, record.experiment_id):
        if executor is not None:
            executor.cleanup(run_id)
        elif parts.backend is not None:
            parts.backend.prune(run_id)
    return Experiment(cfg, record.experiment_id, load_tasks(cfg) if tasks is None else tasks, record.splits, None,
                      parts)
