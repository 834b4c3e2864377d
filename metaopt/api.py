"""The public API: the handful of calls a library user needs, each a thin layer over the same
functions the CLI calls. Everything heavy is imported inside the call, so `import metaopt` is cheap.

    import metaopt
    result = metaopt.evaluate("terminalbench-sample", model="fake/solution", tasks=["hello-greetings"])
    report = metaopt.run_experiment(metaopt.RunConfig(benchmark="terminalbench-sample", model="fake/solution"))
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metaopt.benchmarks.task import Task, TaskLoadError
    from metaopt.evaluation.config import EvalConfig
    from metaopt.evaluation.runner import EvalResult
    from metaopt.export import ExportResult
    from metaopt.meta_agent.config import RunConfig
    from metaopt.meta_agent.report import RunReport
    from metaopt.task_agent.harness import Harness
    from metaopt.traces.store import Store

DEFAULT_DB = Path(".metaopt/metaopt.duckdb")


def load_benchmark(name: str, dataset: str | Path | None = None,
                   tasks: list[str] | None = None) -> list[Task | TaskLoadError]:
    """A benchmark's tasks by name (`metaopt benchmarks list`): Task records, and a TaskLoadError
    row for each task folder that could not be read. `tasks` keeps only those ids."""
    from metaopt.benchmarks.registry import load_benchmark as load

    return load(name, Path(dataset) if dataset else None, tasks)


def load_harness(harness: str | Path = "baseline") -> Harness:
    """A harness by shipped name (baseline, minimal, spreadsheet) or from a folder."""
    from metaopt.task_agent.harness_io import load_harness as load
    from metaopt.task_agent.harness_io import resolve_harness

    return load(resolve_harness(str(harness)))


def open_store(path: str | Path = DEFAULT_DB, *, read_only: bool = False) -> Store:
    """The DuckDB store (created and migrated unless `read_only`). Close it, or use it in `with`."""
    from metaopt.traces.store import Store

    return Store(Path(path), read_only=read_only)


def docker_backend(image_map: str | Path | None = None) -> Any:
    """The Docker sandbox backend, with the image map (default: the packaged one)."""
    from metaopt.sandbox.docker import DockerBackend
    from metaopt.sandbox.images import ImageMap

    return DockerBackend(image_map=ImageMap.load(Path(image_map) if image_map else None))


def evaluate(benchmark: str, *, model: str | None = None, agent: str | None = None,
             harness: str | Path | None = None, tasks: list[str] | None = None, trials: int = 1,
             concurrency: int = 4, dataset: str | Path | None = None, store: Store | None = None,
             backend: Any = None) -> EvalResult:
    """Run an agent on a benchmark's tasks and score every trial with the task's own verifier,
    as `metaopt eval` does: the harness agent with `model`, or `agent` "oracle" / "nop". Trials
    and their spans land in `store` (default: a new one at ./.metaopt/metaopt.duckdb)."""
    from metaopt.evaluation import new_run_id
    from metaopt.evaluation.config import EvalConfig as Config

    cfg = Config(benchmark=benchmark, dataset=Path(dataset) if dataset else None, tasks=tasks, agent=agent,
                     model=model, harness=str(harness) if harness else None, trials=trials, concurrency=concurrency)
    task_list, the_agent = prepare_eval(cfg)
    own = store is None
    store = open_store() if store is None else store
    trace_agent(the_agent, store)
    try:
        return run_evaluation(cfg, task_list, the_agent, store=store, backend=backend or docker_backend(),
                              run_id=new_run_id())
    finally:
        finish_eval(the_agent)
        if own:
            store.close()


def prepare_eval(cfg: EvalConfig) -> tuple[list[Task | TaskLoadError], Any]:
    """The start-up `evaluate` and `metaopt eval` share: `cfg`'s tasks and its agent. Raises
    UserError; touches no store. Then trace_agent(agent, store), and finish_eval(agent) when done."""
    return cfg.load_tasks(), cfg.build_agent()


def trace_agent(agent: Any, store: Store) -> None:
    """Record the agent's spans in `store` (an agent that records none is left as it is)."""
    from metaopt.traces.tracing import Tracing

    if hasattr(agent, "tracing"):
        agent.tracing = Tracing.for_store(store)


def run_evaluation(cfg: EvalConfig, tasks: list[Task | TaskLoadError], agent: Any, *, store: Store, backend: Any,
                   run_id: str, executor: Any = None, on_trial: Any = None) -> EvalResult:
    """run_eval with `cfg`'s trials, concurrency, timeout multiplier and dataset."""
    from metaopt.evaluation import run_eval

    return run_eval(tasks, agent, benchmark=cfg.benchmark, backend=backend, store=store, trials=cfg.trials,
                    concurrency=cfg.concurrency, timeout_multiplier=cfg.timeout_multiplier, run_id=run_id,
                    dataset=str(cfg.dataset) if cfg.dataset else None, executor=executor,
                    on_trial=on_trial)


def finish_eval(agent: Any) -> None:
    """Flush and stop the agent's tracing (prepare_eval set it up)."""
    if getattr(agent, "tracing", None) is not None:
        agent.tracing.shutdown()


def run_experiment(config: RunConfig, *, harness: str | Path = "minimal", store: Store | None = None,
                   backend: Any = None, tasks: list[Task | TaskLoadError] | None = None) -> RunReport:
    """Optimize `harness` as `metaopt run` does: propose revisions from traces, keep only what the
    gate accepts, then score the sealed test split once. Returns the run's report. The run is put
    together as the CLI's is (meta_agent.parts.assemble): `config`'s executor and proposer, the
    Docker backend unless `backend`, the store at ./.metaopt/metaopt.duckdb unless `store`."""
    from metaopt.meta_agent.experiment import open_experiment, plan_experiment
    from metaopt.meta_agent.parts import assemble

    plan = plan_experiment(config, str(harness), tasks)
    parts = assemble(config, DEFAULT_DB if store is None else store, backend=backend)
    try:
        return open_experiment(plan, parts).run()
    finally:
        parts.close()


def export(candidate: str, format: str, out: str | Path, *, db: str | Path = DEFAULT_DB,
           allow_gaps: bool = False) -> ExportResult:
    """Export a harness (a candidate id from the store, or a harness folder) as a standalone agent:
    format is one of `metaopt export --help`'s (python, inspect, openai-agents, ...)."""
    from metaopt.export import export as run_export

    return run_export(candidate, format, Path(out), db=Path(db), allow_gaps=allow_gaps)
