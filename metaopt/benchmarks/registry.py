"""Benchmarks by name: `load_benchmark("terminalbench-sample")`, `load_benchmark("inspect:tasks.py@t")`.

Each benchmark is a `Benchmark` (a description and a loader) registered under a short name
(core.registry; plugins through the `metaopt.benchmarks` entry-point group). A name may carry an
argument after a colon (`inspect:<module>@<task>`), passed to the loader. Unknown names list the
known ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from metaopt.benchmarks.task import Task, TaskLoadError
from metaopt.core.errors import BenchmarkError, UnknownBenchmark
from metaopt.core.registry import Registry

Loaded = list[Task | TaskLoadError]


@dataclass(frozen=True)
class Benchmark:
    """A named set of tasks. `load(dataset, arg)` returns its tasks (or load errors per task) and
    raises BenchmarkError for a bad dataset or argument."""

    description: str
    load: Callable[[Path | None, str | None], Loaded]
    usage: str | None = None
    """How the name is written when it takes an argument (e.g. `inspect:<module>@<task>`)."""


BENCHMARKS = Registry("benchmark", "metaopt.benchmarks", {
    "terminalbench-sample": "metaopt.benchmarks.catalog:TERMINALBENCH_SAMPLE",
    "terminalbench3-sample": "metaopt.benchmarks.catalog:TERMINALBENCH3_SAMPLE",
    "terminalbench": "metaopt.benchmarks.catalog:TERMINALBENCH",
    "spreadsheetbench-sample": "metaopt.benchmarks.catalog:SPREADSHEETBENCH_SAMPLE",
    "spreadsheetbench": "metaopt.benchmarks.catalog:SPREADSHEETBENCH",
    "inspect": "metaopt.benchmarks.catalog:INSPECT",
    "gptpretrain": "metaopt.benchmarks.catalog:GPTPRETRAIN",
}, error=lambda kind, name, known: UnknownBenchmark(kind, name, known))


def get_benchmark(name: str) -> tuple[Benchmark, str | None]:
    """(the benchmark `name` selects, its argument). Raises UnknownBenchmark."""
    key, sep, arg = name.partition(":")
    if key not in BENCHMARKS:
        raise UnknownBenchmark("benchmark", name, listing())
    bench: Benchmark = BENCHMARKS.load(key)
    if sep and bench.usage is None:
        raise UnknownBenchmark("benchmark", name, listing())
    if bench.usage is not None and not arg:
        raise BenchmarkError(f"benchmark '{name}' needs an argument: {bench.usage}")
    return bench, arg or None


def listing() -> list[str]:
    """Every benchmark name as it is written (with its argument pattern)."""
    return [BENCHMARKS.load(n).usage or n for n in BENCHMARKS.names()]


def load_benchmark(name: str, dataset: Path | None = None, task_ids: list[str] | None = None) -> Loaded:
    """The tasks of benchmark `name` (only `task_ids`, in benchmark order, when given)."""
    bench, arg = get_benchmark(name)
    return _select(bench.load(Path(dataset) if dataset is not None else None, arg), task_ids)


def with_gpus(tasks: Loaded, gpus: int | None) -> Loaded:
    """`tasks` with `gpus` GPUs passed to each container (`--gpus`); None keeps what each task asks."""
    if gpus is None:
        return tasks
    return [t.model_copy(update={"resources": t.resources.model_copy(update={"gpus": gpus})})
            if isinstance(t, Task) else t for t in tasks]


def _select(tasks: Loaded, task_ids: list[str] | None) -> Loaded:
    if task_ids:
        known = {t.id for t in tasks}
        missing = [t for t in task_ids if t not in known]
        if missing:
            raise BenchmarkError(f"--tasks: unknown task id '{missing[0]}' (known: {', '.join(sorted(known))})")
        tasks = [t for t in tasks if t.id in set(task_ids)]
    return tasks
