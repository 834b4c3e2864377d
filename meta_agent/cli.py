"""The `metaopt` command: a thin typer layer that builds objects and calls library functions.

Exit codes: 0 done, 1 the run failed, 2 bad input (one line naming the bad field or file),
130 interrupted (finished trials are kept in the store).
"""

from __future__ import annotations

import json
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True, help="metaopt: optimize agent harnesses with evidence.")
sandbox_app = typer.Typer(no_args_is_help=True, help="Sandbox images and cleanup.")
benchmarks_app = typer.Typer(no_args_is_help=True, help="Built-in and supported benchmarks.")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(benchmarks_app, name="benchmarks")


def _register_subcommands() -> None:
    from meta_agent.cli_export import export_cmd
    from meta_agent.cli_models import app as models_app
    from meta_agent.cli_run import run_cmd
    from meta_agent.cli_traces import app as traces_app
    from meta_agent.cli_ui import register as register_ui

    app.add_typer(traces_app, name="traces")
    app.add_typer(models_app, name="models")
    app.command("run")(run_cmd)
    app.command("export")(export_cmd)
    register_ui(app, traces_app)


err = Console(stderr=True)

DB_HELP = "DuckDB store file (default ./.metaopt/metaopt.duckdb)."
GPUS_HELP = "GPUs passed to each task's container through Docker device requests (default: what each task asks; 0: none)."


def fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn known bad-input errors into one line and exit 2."""
    from benchmarks.registry import BenchmarkError
    from sandbox.errors import SandboxUnavailable
    from traces.store import StoreError

    try:
        yield
    except (BenchmarkError, StoreError, SandboxUnavailable) as e:
        fail(str(e))


def _backend(image_map: Optional[Path]):
    from sandbox.docker import DockerBackend
    from sandbox.images import ImageMap

    try:
        imap = ImageMap.load(image_map)
    except (OSError, ValueError) as e:
        fail(f"--image-map: {e}")
    return DockerBackend(image_map=imap)


def _sigterm_as_interrupt() -> None:
    def handler(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


@app.command("eval")
def eval_cmd(
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="Benchmark name (see `metaopt benchmarks list`)."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help="Task directory or directory of tasks."),
    agent: Optional[str] = typer.Option(None, "--agent", help="oracle (the task's own solution) or nop (does nothing); default oracle unless --model is given."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Run the harness agent with this model: provider/model (anthropic/..., openai/..., openai-compatible/..., fake/solution, fake/nop, fake/script:PATH)."),
    harness: Optional[str] = typer.Option(None, "--harness", help="Harness folder, or the name of a shipped one (baseline, minimal). Default: baseline."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Server for openai-compatible/ models (else OPENAI_BASE_URL)."),
    tasks: Optional[str] = typer.Option(None, "--tasks", help="Comma-separated task ids (default: all)."),
    trials: int = typer.Option(1, "--trials", "-k", min=1, help="Attempts per task."),
    concurrency: int = typer.Option(2, "--concurrency", "-j", min=1, help="Trials running at once."),
    timeout_multiplier: float = typer.Option(1.0, "--timeout-multiplier", min=0.01,
                                             help="Scale agent and verifier timeouts (scores are comparable only at 1.0)."),
    image_map: Optional[Path] = typer.Option(None, "--image-map", help="YAML file mapping unpullable FROM images to local ones."),
    gpus: Optional[int] = typer.Option(None, "--gpus", min=0, help=GPUS_HELP),
    db: Path = typer.Option(Path(".metaopt/metaopt.duckdb"), "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object with the results on stdout."),
) -> None:
    """Run an agent on a benchmark's tasks and score every trial with the task's own verifier."""
    from benchmarks.registry import load_benchmark, with_gpus
    from meta_agent.runner import new_run_id, run_eval
    from traces.store import Store

    with user_errors():
        task_list = with_gpus(load_benchmark(benchmark, dataset, [t.strip() for t in tasks.split(",") if t.strip()]
                                             if tasks else None), gpus)
        the_agent = _agent(agent, model, harness, base_url)
        backend = _backend(image_map)
        backend.ping()
        store = Store(db)
        if hasattr(the_agent, "tracing"):
            the_agent.tracing = _tracing(store)
    run_id = new_run_id()
    _sigterm_as_interrupt()
    total = len(task_list) * trials
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[last]}"), TimeElapsedColumn(), console=err, transient=as_json)
    try:
        with progress, user_errors():
            bar = progress.add_task(f"{benchmark} / {the_agent.name}", total=total, last="")

            def on_trial(row: dict) -> None:
                progress.update(bar, advance=1, last=f"{row['task_id']}: {row['status']}")

            result = run_eval(task_list, the_agent, benchmark=benchmark, backend=backend, store=store,
                              trials=trials, concurrency=concurrency, timeout_multiplier=timeout_multiplier,
                              run_id=run_id, dataset=str(dataset) if dataset else None, on_trial=on_trial)
    except KeyboardInterrupt:
        err.print(f"interrupted: finished trials of {run_id} are in {db}; containers removed")
        raise typer.Exit(130)
    finally:
        if getattr(the_agent, "tracing", None) is not None:
            the_agent.tracing.shutdown()
        store.close()
    if as_json:
        print(json.dumps(result.to_json()))
    else:
        _print_table(result, db)


def _agent(agent: Optional[str], model: Optional[str], harness: Optional[str], base_url: Optional[str]):
    """The agent to run: a reference agent (--agent) or the harness agent (--model)."""
    from benchmarks.agents import AGENTS
    from meta_agent.agents import HarnessAgent
    from task_agent.harness import HarnessError
    from task_agent.harness_io import load_harness, resolve_harness
    from task_agent.models import get_model
    from task_agent.models.errors import ModelConfigError

    if model is None:
        if harness is not None:
            fail("--harness needs --model (the model that runs the harness)")
        agent = agent or "oracle"
        if agent not in AGENTS:
            fail(f"--agent: unknown agent '{agent}' (known: {', '.join(AGENTS)})")
        return AGENTS[agent]()
    if agent is not None:
        fail("give either --agent (oracle, nop) or --model, not both")
    try:
        h = load_harness(resolve_harness(harness or "baseline"))
        if model != "fake/solution":  # fake/solution needs a task; everything else is checked now
            get_model(model, base_url=base_url)
    except HarnessError as e:
        fail(f"--harness: {e}")
    except ModelConfigError as e:
        fail(f"--model: {e}")
    return HarnessAgent(h, model, base_url=base_url)


def _tracing(store):
    from traces.tracing import Tracing

    return Tracing.for_store(store)


def _print_table(result, db: Path) -> None:
    t = Table(title=f"{result.run_id}  ({result.benchmark}, agent {result.agent})")
    for c in ("task", "trial", "status", "score", "time", "note"):
        t.add_column(c)
    colors = {"passed": "green", "failed": "red", "error": "yellow", "timeout": "magenta"}
    for r in sorted(result.rows, key=lambda r: (r["task_id"], r["attempt"])):
        score = "-" if r.get("score") is None else f"{r['score']:.2f}"
        note = (r.get("error") or r.get("failure_mode") or "")[:80]
        t.add_row(r["task_id"], str(r["attempt"]), f"[{colors.get(r['status'], 'white')}]{r['status']}[/]",
                  score, f"{r.get('duration_s') or 0:.1f}s", note)
    Console().print(t)
    mean = result.mean_score
    n_err = sum(r["status"] == "error" for r in result.rows)
    Console().print(f"mean score {'-' if mean is None else f'{mean:.3f}'} over {len(result.rows) - n_err} scored trials"
                    f"{f', {n_err} errors (not counted as 0)' if n_err else ''}; store: {db}")


@sandbox_app.command("base")
def sandbox_base(
    tag: str = typer.Option("metaopt-base:latest", "--tag", help="Image tag to build."),
    mirror: str = typer.Option("http://deb.debian.org/debian", "--mirror", help="Debian mirror for debootstrap."),
) -> None:
    """Build the Debian base image (bash, python3, pytest, uv offline, tmux, git, build tools...)."""
    from sandbox.base_image import build_base_image

    try:
        image = build_base_image(tag, mirror=mirror, progress=lambda line: err.print(f"[dim]{line}[/dim]"))
    except RuntimeError as e:
        fail(str(e))
    print(image)


@sandbox_app.command("prune")
def sandbox_prune(
    run_id: Optional[str] = typer.Option(None, "--run", help="Only this run's containers."),
    images: bool = typer.Option(False, "--images", help="Also remove built task images."),
) -> None:
    """Remove every container, network and volume metaopt created (and optionally task images)."""
    with user_errors():
        counts = _backend(None).prune(run_id, images=images)
    print(", ".join(f"{k}: {v}" for k, v in counts.items()))


@benchmarks_app.command("list")
def benchmarks_list() -> None:
    """List benchmark names."""
    from benchmarks.registry import BENCHMARKS

    for name, (desc, _) in BENCHMARKS.items():
        print(f"{name:24} {desc}")


def main() -> None:
    _register_subcommands()
    app()


if __name__ == "__main__":
    sys.exit(main())
