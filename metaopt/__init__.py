"""metaopt: a harness-engineering optimizer. Runs agent benchmarks in Docker sandboxes, traces them
into one DuckDB file, and keeps only harness revisions that a statistical gate accepts.

The public API (everything else is reachable but private; nothing is imported until first use):

    evaluate(benchmark, model=..., tasks=[...])   run and score an agent, as `metaopt eval`
    run_experiment(RunConfig(...), harness=...)    optimize a harness, as `metaopt run`
    load_benchmark(name), load_harness(name)       Task records, a Harness
    open_store(path)                               the DuckDB store of runs, trials, spans
    export(candidate, format, out)                 the winner as a standalone agent
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "evaluate": "metaopt.api", "run_experiment": "metaopt.api", "load_benchmark": "metaopt.api",
    "load_harness": "metaopt.api", "open_store": "metaopt.api", "export": "metaopt.api",
    "docker_backend": "metaopt.api",
    "RunConfig": "metaopt.meta_agent.config", "RunReport": "metaopt.meta_agent.report", "EvalConfig": "metaopt.evaluation.config",
    "Harness": "metaopt.task_agent.harness", "Task": "metaopt.benchmarks.task",
    "TrialResult": "metaopt.evaluation.result", "EvalResult": "metaopt.evaluation.runner",
    "Store": "metaopt.traces.store", "UserError": "metaopt.core.errors",
}
__all__ = ["EvalConfig", "EvalResult", "Harness", "RunConfig", "RunReport", "Store", "Task", "TrialResult", "UserError",
           "docker_backend", "evaluate", "export", "load_benchmark", "load_harness", "open_store", "run_experiment"]

if TYPE_CHECKING:
    from metaopt.api import docker_backend, evaluate, export, load_benchmark, load_harness, open_store, run_experiment
    from metaopt.benchmarks.task import Task
    from metaopt.core.errors import UserError
    from metaopt.evaluation.config import EvalConfig
    from metaopt.evaluation.result import TrialResult
    from metaopt.evaluation.runner import EvalResult
    from metaopt.meta_agent.config import RunConfig
    from metaopt.meta_agent.report import RunReport
    from metaopt.task_agent.harness import Harness
    from metaopt.traces.store import Store


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'metaopt' has no attribute {name!r}")
