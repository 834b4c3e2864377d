"""`metaopt eval`: run an agent on a benchmark's tasks (a thin layer over evaluation.run_eval)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from metaopt.cli.common import (
    DB,
    EXECUTOR_HELP,
    GPUS_HELP,
    RAY_ADDRESS_HELP,
    backend,
    build,
    err,
    executor_for,
    progress,
    sigterm_as_interrupt,
    split_ids,
)


def _default(field: str):
    from metaopt.evaluation.config import EvalConfig

    return EvalConfig.model_fields[field].default


MODELS_HELP = ("Run the harness agent with this model: provider/model (anthropic/..., openai/..., "
               "openai-compatible/..., local/qwen2.5-coder-0.5b, local:PATH.gguf, fake/solution, fake/nop, "
               "fake/script:PATH).")


def eval_cmd(
    benchmark: str = typer.Option(..., "--benchmark", "-b", help="Benchmark name (see `metaopt benchmarks list`)."),
    dataset: Path | None = typer.Option(None, "--dataset", help="Task directory or directory of tasks."),
    agent: str | None = typer.Option(None, "--agent", help="oracle (the task's own solution), cheat (its cheat/solve.sh: must score 0) or nop (does nothing); default oracle unless --model is given."),
    model: str | None = typer.Option(None, "--model", "-m", help=MODELS_HELP),
    harness: str | None = typer.Option(None, "--harness", help="Harness folder, or the name of a shipped one (baseline, minimal). Default: baseline."),
    base_url: str | None = typer.Option(None, "--base-url", help="Server for openai-compatible/ models (else OPENAI_BASE_URL)."),
    tasks: str | None = typer.Option(None, "--tasks", help="Comma-separated task ids (default: all)."),
    trials: int = typer.Option(_default("trials"), "--trials", "-k", help="Attempts per task."),
    concurrency: int = typer.Option(_default("concurrency"), "--concurrency", "-j", help="Trials running at once."),
    timeout_multiplier: float = typer.Option(_default("timeout_multiplier"), "--timeout-multiplier",
                                             help="Scale agent and verifier timeouts (scores are comparable only at 1.0)."),
    image_map: Path | None = typer.Option(None, "--image-map", help="YAML file mapping unpullable FROM images to local ones."),
    gpus: int | None = typer.Option(None, "--gpus", help=GPUS_HELP),
    executor: str = typer.Option(_default("executor"), "--executor", help=EXECUTOR_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    db: Path = DB,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object with the results on stdout."),
) -> None:
    """Run an agent on a benchmark's tasks and score every trial with the task's own verifier."""
    from metaopt.api import finish_eval, prepare_eval, run_evaluation, trace_agent
    from metaopt.evaluation import new_run_id
    from metaopt.evaluation.config import EvalConfig
    from metaopt.traces.store import Store

    sigterm_as_interrupt()  # first: a SIGTERM at any point takes the Ctrl-C path
    cfg = build(EvalConfig, {"timeout_multiplier": "--timeout-multiplier"}, benchmark=benchmark, dataset=dataset,
                tasks=split_ids(tasks), agent=agent, model=model, harness=harness, base_url=base_url, trials=trials,
                concurrency=concurrency, timeout_multiplier=timeout_multiplier, gpus=gpus, executor=executor,
                ray_address=ray_address)
    task_list, the_agent = prepare_eval(cfg)  # every check before the Docker daemon and the store are touched
    docker = backend(image_map, cfg.executor)
    runner = executor_for(cfg.executor, cfg.ray_address, docker)
    store = Store(db)
    trace_agent(the_agent, store)
    run_id = new_run_id()
    bar_view = progress(f"{benchmark} / {the_agent.name}", transient=as_json)
    try:
        with bar_view:
            bar = bar_view.add_task("eval", total=len(task_list) * cfg.trials, last="")
            result = run_evaluation(cfg, task_list, the_agent, store=store, backend=docker, run_id=run_id,
                                    executor=runner,
                                    on_trial=lambda r: bar_view.update(bar, advance=1, last=f"{r.task_id}: {r.status}"))
    except KeyboardInterrupt:
        err.print(f"interrupted: finished trials of {run_id} are in {db}; containers removed")
        raise typer.Exit(130)
    finally:
        finish_eval(the_agent)
        store.close()
    if as_json:
        print(json.dumps(result.to_json()))
    else:
        _print_table(result, db)
    bad = _failed_run(result)
    if bad:
        err.print(f"[red]{bad}[/]")
        raise typer.Exit(1)


def _failed_run(result) -> str | None:
    """Why the run as a whole failed (exit 1): tasks that could not be loaded, or no trial scored."""
    invalid = sorted({r.task_id for r in result.rows if r.failure_mode == "task_invalid"})
    if invalid:
        return f"{len(invalid)} task(s) could not be loaded ({', '.join(invalid[:5])}): see the notes above"
    if result.rows and all(r.status == "error" for r in result.rows):
        return f"every one of the {len(result.rows)} trials errored: no score"
    return None


def _note(text: str) -> str:
    """The reason, readable: a path's folders above the task's own are dropped, 240 characters."""
    text = re.sub(r"(?:/[^/\s:]+)+/([^/\s:]+/[^/\s:]+)", r"\1", text)
    return text if len(text) <= 240 else text[:237] + "..."


def _print_table(result, db: Path) -> None:
    t = Table(title=f"{result.run_id}  ({result.benchmark}, agent {result.agent})")
    for c in ("task", "trial", "status", "score", "time", "note"):
        t.add_column(c, overflow="fold")
    colors = {"passed": "green", "failed": "red", "error": "yellow", "timeout": "magenta", "tampered": "bright_red"}
    for r in sorted(result.rows, key=lambda r: (r.task_id, r.attempt)):
        score = "-" if r.score is None else f"{r.score:.2f}"
        note = _note(r.error or r.failure_mode or "")
        t.add_row(r.task_id, str(r.attempt), f"[{colors.get(r.status, 'white')}]{r.status}[/]",
                  score, f"{r.duration_s or 0:.1f}s", note)
    Console().print(t)
    mean = result.mean_score
    n_err = sum(r.status == "error" for r in result.rows)
    n_tam = sum(r.status == "tampered" for r in result.rows)
    Console().print(f"mean score {'-' if mean is None else f'{mean:.3f}'} over {len(result.rows) - n_err} scored trials"
                    f"{f', {n_err} errors (not counted as 0)' if n_err else ''}"
                    f"{f', {n_tam} tampered (scored 0; evidence: metaopt traces show TRIAL)' if n_tam else ''}; store: {db}")
