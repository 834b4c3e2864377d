"""Format detection and dataset loading: a path becomes a list of Tasks (or load errors), each
task directory read by its format's loader (benchmarks.tb1, benchmarks.harbor; SpreadsheetBench's
dataset.json by benchmarks.spreadsheet.loader)."""

from __future__ import annotations

from pathlib import Path

from metaopt.benchmarks import harbor, tb1
from metaopt.benchmarks.task import Task, TaskLoadError
from metaopt.core.errors import BenchmarkError, TaskFormatError


def detect(task_dir: Path) -> str | None:
    """The format of a task directory, by marker file: 'tb1', 'harbor' or None."""
    if (task_dir / "task.yaml").is_file():
        return "tb1"
    if (task_dir / "task.toml").is_file():
        return "harbor"
    return None


def load_task(task_dir: Path, benchmark: str) -> Task:
    fmt = detect(task_dir)
    if fmt == "tb1":
        return tb1.load(task_dir, benchmark)
    if fmt == "harbor":
        return harbor.load(task_dir, benchmark)
    raise TaskFormatError(f"{task_dir}: no task.yaml or task.toml")


def load_dataset(path: Path, benchmark: str) -> list[Task | TaskLoadError]:
    """Every task under `path` (a task directory itself, or a directory of task directories),
    sorted by id. A malformed task becomes a TaskLoadError; the others still load.
    Raises BenchmarkError / TaskFormatError when the path holds no task at all."""
    path = Path(path)
    if not path.is_dir():
        raise BenchmarkError(f"dataset path {path} does not exist or is not a directory")
    if (path / "dataset.json").is_file():  # raw SpreadsheetBench (reference section 0)
        from metaopt.benchmarks.spreadsheet.loader import load_dataset as load_spreadsheets
        return load_spreadsheets(path, benchmark)
    dirs = [path] if detect(path) else sorted(p for p in path.iterdir() if p.is_dir() and detect(p))
    if not dirs:
        raise TaskFormatError(f"{path}: no tasks found (looked for task.yaml or task.toml in it and its subdirectories)")
    out: list[Task | TaskLoadError] = []
    for d in dirs:
        try:
            out.append(load_task(d, benchmark))
        except (TaskFormatError, OSError, UnicodeDecodeError) as e:
            out.append(TaskLoadError(id=d.name, source_dir=d, error=str(e)))
    return out
