"""Benchmarks by name. Unknown names list the known ones."""

from __future__ import annotations

from pathlib import Path

from benchmarks.formats import load_dataset
from benchmarks.task import Task, TaskLoadError

SAMPLES = Path(__file__).parent / "samples"

# name -> (description, packaged dataset dir or None when --dataset is required)
BENCHMARKS: dict[str, tuple[str, Path | None]] = {
    "terminalbench-sample": ("metaopt's own Terminal-Bench-style tasks (TB1 and Harbor formats), offline", SAMPLES / "terminalbench"),
    "terminalbench": ("a local Terminal-Bench 1.x or 2.x (Harbor) checkout: --dataset PATH", None),
    "spreadsheetbench-sample": ("metaopt's own SpreadsheetBench-style tasks (dataset.json layout, several test cases), offline", SAMPLES / "spreadsheetbench"),
    "spreadsheetbench": ("a local SpreadsheetBench dataset (dataset.json + spreadsheet/<id>/: 912 v0.1 or Verified 400): --dataset PATH", None),
    "inspect:<module>@<task>": ("an inspect-ai task's samples, scored by its own scorers (metaopt[inspect])", None),
    "gptpretrain": ("GPT pretraining (autoresearch): lower val_bpb; --dataset = optional text/parquet dir", Path(__file__).parent / "gptpretrain"),
}


class BenchmarkError(ValueError):
    """Bad benchmark name, dataset path or task selection. One line, exit 2."""


def load_benchmark(name: str, dataset: Path | None = None, task_ids: list[str] | None = None) -> list[Task | TaskLoadError]:
    if name.startswith("inspect:"):
        return _select(_load_inspect(name, dataset), task_ids)
    if name not in BENCHMARKS:
        raise BenchmarkError(f"unknown benchmark '{name}' (known: {', '.join(BENCHMARKS)})")
    if name == "gptpretrain":  # built from a corpus, not task dirs; --dataset is its data dir
        from benchmarks.gptpretrain import load_tasks

        try:
            return load_tasks(Path(dataset) if dataset is not None else None, task_ids)
        except (OSError, ValueError) as e:
            raise BenchmarkError(str(e)) from None
    packaged = BENCHMARKS[name][1]
    if packaged is None and dataset is None:
        raise BenchmarkError(f"benchmark '{name}' needs --dataset PATH (a local checkout of its tasks)")
    if packaged is not None and dataset is not None:
        raise BenchmarkError(f"benchmark '{name}' ships its own tasks; drop --dataset (or use --benchmark terminalbench)")
    path = Path(dataset) if dataset is not None else packaged
    if not path.exists():
        raise BenchmarkError(f"--dataset: {path} does not exist")
    try:
        tasks = load_dataset(path, name)
    except (OSError, ValueError) as e:
        raise BenchmarkError(str(e)) from None
    return _select(tasks, task_ids)


def with_gpus(tasks: list[Task | TaskLoadError], gpus: int | None) -> list[Task | TaskLoadError]:
    """`tasks` with `gpus` GPUs passed to each container (`--gpus`); None keeps what each task asks."""
    if gpus is None:
        return tasks
    return [t.model_copy(update={"resources": t.resources.model_copy(update={"gpus": gpus})})
            if isinstance(t, Task) else t for t in tasks]


def _load_inspect(name: str, dataset: Path | None) -> list[Task | TaskLoadError]:
    """`inspect:<module>@<task>`: an inspect-ai task's samples (imported lazily: inspect is slow)."""
    if dataset is not None:
        raise BenchmarkError(f"benchmark '{name}' takes its samples from the inspect task; drop --dataset")
    from benchmarks.inspect_bridge import load_tasks

    try:
        return load_tasks(name[len("inspect:"):])
    except ValueError as e:
        raise BenchmarkError(str(e)) from None


def _select(tasks: list[Task | TaskLoadError], task_ids: list[str] | None) -> list[Task | TaskLoadError]:
    if task_ids:
        known = {t.id for t in tasks}
        missing = [t for t in task_ids if t not in known]
        if missing:
            raise BenchmarkError(f"--tasks: unknown task id '{missing[0]}' (known: {', '.join(sorted(known))})")
        tasks = [t for t in tasks if t.id in set(task_ids)]
    return tasks
