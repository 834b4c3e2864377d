"""`metaopt import harbor JOB_DIR`: trials other tools ran, read into the store."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from metaopt.cli.common import DB, err, tracing

app = typer.Typer(no_args_is_help=True, help="Read trials run elsewhere into the store.")


@app.command("harbor")
def harbor_cmd(
    job_dir: Path = typer.Argument(..., help="A Harbor job folder (harbor run -o JOBS --job-name NAME: JOBS/NAME)."),
    run_id: str | None = typer.Option(None, "--run-id", help="Run id to import into (default: harbor-<job name>)."),
    benchmark: str = typer.Option("harbor", "--benchmark", "-b", help="Benchmark name recorded on the trials."),
    db: Path = DB,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object describing the import."),
) -> None:
    """Import a Harbor job: every trial's result, verifier output and ATIF trajectory (as spans and
    messages). Importing the same job again adds nothing."""
    from metaopt.evaluation.harbor_jobs import import_job
    from metaopt.traces.store import Store

    with Store(db) as store:
        trace = tracing(store)
        try:
            result = import_job(store, job_dir, tracing=trace, benchmark=benchmark, run_id=run_id)
        finally:
            trace.shutdown()
    if as_json:
        print(json.dumps(result.to_json()))
        return
    if result.skipped:
        err.print(f"{len(result.skipped)} trials already in the store (skipped)", highlight=False)
    print(f"imported {len(result.imported)} trials from {job_dir} into run {result.run_id}")
