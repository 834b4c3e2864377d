"""`metaopt regrade` (re-score stored artifacts under the current verifier, no agent run) and
`metaopt artifacts` (the kept artifacts: size, prune)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from metaopt.cli.common import DB, backend, err, fail, progress, sigterm_as_interrupt, split_ids

artifacts_app = typer.Typer(no_args_is_help=True, help="The artifacts trials kept for regrading.")


def regrade_cmd(
    name: str = typer.Argument(..., help="A run id, or an experiment id (all of its runs)."),
    tasks: str | None = typer.Option(None, "--tasks", help="Comma-separated task ids (default: all)."),
    concurrency: int = typer.Option(2, "--concurrency", "-j", help="Trials running at once."),
    image_map: Path | None = typer.Option(None, "--image-map", help="YAML file mapping unpullable FROM images to local ones."),
    db: Path = DB,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object with the verdicts on stdout."),
) -> None:
    """Re-score a run's stored artifacts under the task's verifier as it is now, without running
    any agent: new trial rows in a run of their own beside the old ones; lists the changed verdicts."""
    from metaopt.evaluation.regrade import regrade, runs_of
    from metaopt.traces.store import Store

    sigterm_as_interrupt()
    if not db.exists():
        fail(f"--db: {db} does not exist")
    store = Store(db)
    try:
        runs = runs_of(store, name)
        if not runs:
            fail(f"regrade: no run or experiment named '{name}' in {db}")
        docker, done = backend(image_map), []
        for run in runs:
            with progress(f"regrade {run.run_id}", transient=as_json) as view:
                bar = view.add_task("regrade", total=None, last="")
                done.append(regrade(store, run, backend=docker, tasks=split_ids(tasks), concurrency=concurrency,
                                    on_trial=lambda r, view=view, bar=bar: view.update(bar, advance=1,
                                                                                       last=f"{r.task_id}: {r.status}")))
    except KeyboardInterrupt:
        err.print(f"interrupted: finished regrades are in {db}")
        raise typer.Exit(130) from None
    finally:
        store.close()
    if as_json:
        print(json.dumps({"regrades": [d.to_json() for d in done]}))
        return
    for d in done:
        _table(d.to_json())


def _table(r: dict) -> None:
    t = Table(title=f"{r['source']} regraded as {r['run_id']}")
    for c in ("task", "trial", "old", "new", "verifier", "note"):
        t.add_column(c, overflow="fold")
    for row in r["trials"]:
        old, new = row["old"], row["new"]
        same = (old["status"], old["score"]) == (new["status"], new["score"])
        fmt = lambda v: f"{v['status']} {'-' if v['score'] is None else format(v['score'], '.2f')}"
        t.add_row(row["task"], str(row["attempt"]), fmt(old), fmt(new) if same else f"[bold yellow]{fmt(new)}[/]",
                  "changed" if row["verifier_changed"] else "same", (new.get("error") or "")[:160])
    Console().print(t)
    Console().print(f"{r['changed']} of {len(r['trials'])} verdicts changed"
                    + (f"; {len(r['skipped'])} trials kept no artifacts (not regraded)" if r["skipped"] else ""))


@artifacts_app.command("prune")
def artifacts_prune(
    max_gb: float = typer.Option(0.0, "--max-gb", help="Keep at most this many GiB (least recently used go first)."),
    db: Path = DB,
) -> None:
    """Remove kept artifacts beyond a size (trials whose artifacts are gone can no longer be regraded)."""
    from metaopt.evaluation.artifact_store import ArtifactStore

    if max_gb < 0:
        fail("--max-gb: must be 0 or more")
    print(json.dumps(ArtifactStore.beside(db).prune(int(max_gb * (1 << 30)))))


@artifacts_app.command("size")
def artifacts_size(db: Path = DB) -> None:
    """Bytes the kept artifacts beside the store take."""
    from metaopt.evaluation.artifact_store import ArtifactStore

    store = ArtifactStore.beside(db)
    print(json.dumps({"folder": str(store.root), "bytes": store.size()}))
