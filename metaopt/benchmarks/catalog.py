"""The built-in benchmarks (registered in benchmarks.registry). Loaders import their adapters
only when called: inspect-ai and torch are slow to import and optional."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from metaopt.benchmarks.registry import Benchmark, Loaded
from metaopt.core.errors import BenchmarkError

SAMPLES = Path(__file__).parent / "samples"


def _dataset_dir(name: str, packaged: Path | None, dataset: Path | None) -> Path:
    if packaged is None and dataset is None:
        raise BenchmarkError(f"benchmark '{name}' needs --dataset PATH (a local checkout of its tasks)")
    if packaged is not None and dataset is not None:
        raise BenchmarkError(f"benchmark '{name}' ships its own tasks; drop --dataset (or use --benchmark "
                             f"{name.removesuffix('-sample')})")
    path = dataset if dataset is not None else packaged
    if path is None:  # ruled out above; says so to the type checker
        raise BenchmarkError(f"benchmark '{name}' needs --dataset PATH (a local checkout of its tasks)")
    if not path.exists():
        raise BenchmarkError(f"--dataset: {path} does not exist")
    return path


def _task_dirs(name: str, packaged: Path | None) -> Callable[[Path | None, str | None], Loaded]:
    def load(dataset: Path | None, arg: str | None) -> Loaded:
        from metaopt.benchmarks.datasets import load_dataset

        path = _dataset_dir(name, packaged, dataset)
        try:
            return load_dataset(path, name)
        except (OSError, ValueError) as e:
            if isinstance(e, BenchmarkError):
                raise
            raise BenchmarkError(str(e)) from None
    return load


def _inspect(dataset: Path | None, arg: str | None) -> Loaded:
    if dataset is not None:
        raise BenchmarkError(f"benchmark 'inspect:{arg}' takes its samples from the inspect task; drop --dataset")
    from metaopt.benchmarks.inspect_bridge import load_tasks

    try:
        return load_tasks(arg or "")
    except ValueError as e:
        if isinstance(e, BenchmarkError):
            raise
        raise BenchmarkError(str(e)) from None


def _gptpretrain(dataset: Path | None, arg: str | None) -> Loaded:
    from metaopt.benchmarks.gptpretrain import load_tasks

    try:
        return load_tasks(dataset)
    except (OSError, ValueError) as e:
        if isinstance(e, BenchmarkError):
            raise
        raise BenchmarkError(str(e)) from None


TERMINALBENCH_SAMPLE = Benchmark("metaopt's own Terminal-Bench-style tasks (TB1 and Harbor formats), offline",
                                 _task_dirs("terminalbench-sample", SAMPLES / "terminalbench"))
TERMINALBENCH3_SAMPLE = Benchmark("metaopt's own Terminal-Bench-3-style tasks (separate verifier containers, "
                                  "artifacts, collect hooks, cheat solutions), offline",
                                  _task_dirs("terminalbench3-sample", SAMPLES / "terminalbench3"))
TERMINALBENCH = Benchmark("a local Terminal-Bench 1.x, 2.x, 3 or 4 (Harbor task folders) checkout: --dataset PATH",
                          _task_dirs("terminalbench", None))
SPREADSHEETBENCH_SAMPLE = Benchmark("metaopt's own SpreadsheetBench-style tasks (dataset.json layout, several "
                                    "test cases), offline", _task_dirs("spreadsheetbench-sample",
                                                                      SAMPLES / "spreadsheetbench"))
SPREADSHEETBENCH = Benchmark("a local SpreadsheetBench dataset (dataset.json + spreadsheet/<id>/: 912 v0.1 or "
                             "Verified 400): --dataset PATH", _task_dirs("spreadsheetbench", None))
INSPECT = Benchmark("an inspect-ai task's samples, scored by its own scorers (metaopt[inspect])", _inspect,
                    usage="inspect:<module>@<task>")
GPTPRETRAIN = Benchmark("GPT pretraining (autoresearch): lower val_bpb; --dataset = optional text/parquet dir",
                        _gptpretrain)
