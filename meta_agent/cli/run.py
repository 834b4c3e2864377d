"""`metaopt run`: the optimizer from the command line (a thin layer over meta_agent.experiment)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from meta_agent.cli.common import DB, GPUS_HELP, backend, build, err, progress, sigterm_as_interrupt, split_ids, tracing
from meta_agent.config import default

FLAGS = {"time_limit_s": "--time-limit", "split": "--split"}


def run_cmd(
    benchmark: Optional[str] = typer.Option(None, "--benchmark", "-b", help="Benchmark name (not needed with --resume)."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help="Task directory or directory of tasks."),
    tasks: Optional[str] = typer.Option(None, "--tasks", help="Comma-separated task ids to run on (then split as usual; default: all)."),
    harness: str = typer.Option("baseline", "--harness", help="Starting harness: a folder or a shipped name."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Task model, provider/model (e.g. fake/solution)."),
    meta_model: str = typer.Option(default("meta_model"), "--meta-model", help="heuristic (no model), or provider/model for the llm meta-agent (e.g. anthropic/claude-opus-4-1, fake/script:PATH)."),
    strategy: str = typer.Option(default("strategy"), "--strategy", help="greedy (extend the incumbent) or pareto (per-task frontier, with merges)."),
    trials: int = typer.Option(default("trials"), "--trials", "-k", help="Trials per task and candidate (K)."),
    seed: int = typer.Option(default("seed"), "--seed", help="Seed of the split and the strategy."),
    split: str = typer.Option(",".join(str(f) for f in default("split")), "--split", help="train,validation,test fractions."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="Stop when task + meta spend reach this."),
    max_trials: Optional[int] = typer.Option(None, "--max-trials", help="Stop after this many trials."),
    max_iterations: int = typer.Option(default("max_iterations"), "--max-iterations", help="Proposals at most."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Stop after this many seconds."),
    target_score: Optional[float] = typer.Option(None, "--target-score", help="Stop when validation reaches it."),
    plateau: int = typer.Option(default("plateau"), "--plateau", help="Stop after this many proposals without a gain."),
    allow_model_changes: bool = typer.Option(False, "--allow-model-changes", help="Let revisions change model knobs."),
    concurrency: int = typer.Option(default("concurrency"), "--concurrency", "-j", help="Trials running at once."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Server for openai-compatible/ task models."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help=GPUS_HELP),
    resume: Optional[str] = typer.Option(None, "--resume", help="Finish an interrupted experiment (with the options it was started with)."),
    db: Path = DB,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object at the end."),
) -> None:
    """Optimize a harness: propose revisions from traces, keep only what the gate accepts."""
    from core.errors import UserError
    from meta_agent.config import RunConfig
    from meta_agent.experiment import find_experiment, plan_experiment, resume_experiment, start_experiment
    from meta_agent.optimize import preflight
    from meta_agent.splits import parse_split
    from traces.store import Store

    sigterm_as_interrupt()  # first: a SIGTERM at any point takes the Ctrl-C path
    if resume:
        record = find_experiment(db, resume)
        if record.status == "finished":  # nothing to resume: show what it found
            return _show(record.result, as_json)
        cfg = RunConfig.model_validate(record.config["run"])
    else:
        if not benchmark or not model:
            raise UserError("--benchmark and --model are required (or --resume EXPERIMENT)")
        cfg = build(RunConfig, FLAGS, benchmark=benchmark, dataset=str(dataset) if dataset else None,
                    tasks=split_ids(tasks), model=model, meta_model=meta_model, strategy=strategy, trials=trials,
                    seed=seed, split=parse_split(split), budget_usd=budget_usd, max_trials=max_trials,
                    max_iterations=max_iterations, time_limit_s=time_limit, target_score=target_score,
                    plateau=plateau, allow_model_changes=allow_model_changes, concurrency=concurrency,
                    base_url=base_url, gpus=gpus)
    check_meta_model(cfg.meta_model)
    check_strategy(cfg.strategy)
    plan = None if resume else plan_experiment(cfg, harness)  # every check before the store is touched
    docker = backend()
    bar_view = progress("trials", transient=True)
    bar = bar_view.add_task("trials", total=None, last="")
    store = Store(db)
    trace = tracing(store)
    hooks = dict(backend=docker, tracing=trace, on_trial=lambda r: bar_view.update(
        bar, advance=1, last=f"{r.split} {r.task_id}: {r.status}"),
        on_event=lambda line: bar_view.console.print(line, highlight=False, markup=False))
    try:
        experiment = (resume_experiment(record, store=store, **hooks) if resume
                      else start_experiment(plan, store=store, **hooks))
    except BaseException as e:
        trace.shutdown()
        store.close()
        if isinstance(e, KeyboardInterrupt):
            err.print("interrupted before the experiment started")
            raise typer.Exit(130)
        raise
    splits = experiment.splits
    n = preflight(splits, cfg.trials)
    err.print(f"experiment {experiment.id}: train {len(splits['train'])}, validation {len(splits['validation'])}, "
              f"test {len(splits['test'])} tasks (sealed); pre-flight: baseline {n['baseline']} trials, "
              f"each iteration up to {n['per_iteration']} trials, test {n['test']}", highlight=False)
    try:
        with bar_view:
            result = experiment.run()
    except KeyboardInterrupt:
        err.print(f"interrupted: resume with `metaopt run --resume {experiment.id} --db {db}`")
        raise typer.Exit(130)
    finally:
        trace.shutdown()
        store.close()
    _show(result, as_json)


def _show(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, default=str))
    else:
        report(result)


def report(r: dict) -> None:
    """The end-of-run report: sealed test scores with CIs, what was kept and why, spend."""
    from rich.markup import escape
    from rich.table import Table

    out = Console()
    out.print(f"[bold]{r['experiment_id']}[/]  stopped: {r['stop_reason']}", highlight=False)
    t = Table(title="sealed test split (95% t-interval over tasks)")
    for c in ("harness", "score", "95% CI"):
        t.add_column(c)
    t.add_row("baseline", f"{r['baseline_test_score']:.3f}", "[{:.3f}, {:.3f}]".format(*r["baseline_test_ci"]))
    t.add_row(f"best ({r['best_candidate'].rsplit('/', 1)[-1]})", f"{r['best_test_score']:.3f}",
              "[{:.3f}, {:.3f}]".format(*r["best_test_ci"]))
    out.print(t)
    for c in r["candidates"][1:]:
        colour = {"accepted": "green", "rejected": "red", "invalid": "red", "inconclusive": "yellow"}.get(c["status"], "white")
        out.print(f"[{colour}]{c['status']:>12}[/] {c['id'].rsplit('/', 1)[-1]}: {escape(c['rationale'] or '')}",
                  highlight=False)
    out.print(f"{r['accepted']} accepted of {r['iterations']} proposals; spend ${r['spend_usd']:.2f} "
              f"(task ${r['spend']['task']:.2f}, meta ${r['spend']['meta']:.2f}); chart: {r['progress_png']}", highlight=False)
    out.print(f"export the best: metaopt export {r['best_candidate']} --format python --out DIR", highlight=False,
              soft_wrap=True)  # one line, whatever the terminal width: users copy it


def check_meta_model(meta_model: str) -> None:
    """A known proposer, or a provider/model whose client can be built now (API key set)."""
    from core.errors import UserError
    from meta_agent.proposers import get_proposer

    try:
        get_proposer(meta_model)
    except UserError as e:
        e.field = e.field or "--meta-model"
        raise


def check_strategy(name: str) -> None:
    from core.errors import UserError
    from meta_agent.strategies import STRATEGIES

    if name not in STRATEGIES:
        raise UserError(f"unknown strategy '{name}' (known: {', '.join(STRATEGIES.names())})", field="--strategy")
