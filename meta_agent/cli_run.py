"""`metaopt run`: the optimizer from the command line (a thin layer over meta_agent.optimize)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

err = Console(stderr=True)


def run_cmd(
    benchmark: Optional[str] = typer.Option(None, "--benchmark", "-b", help="Benchmark name (not needed with --resume)."),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help="Task directory or directory of tasks."),
    harness: str = typer.Option("baseline", "--harness", help="Starting harness: a folder or a shipped name."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Task model, provider/model (e.g. fake/solution)."),
    meta_model: str = typer.Option("heuristic", "--meta-model", help="heuristic (no model), or provider/model for the llm meta-agent (e.g. anthropic/claude-opus-4-1, fake/script:PATH)."),
    strategy: str = typer.Option("greedy", "--strategy", help="greedy (extend the incumbent) or pareto (per-task frontier, with merges)."),
    trials: int = typer.Option(3, "--trials", "-k", min=1, help="Trials per task and candidate (K)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the split and the strategy."),
    split: str = typer.Option("0.5,0.25,0.25", "--split", help="train,validation,test fractions."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="Stop when task + meta spend reach this."),
    max_trials: Optional[int] = typer.Option(None, "--max-trials", help="Stop after this many trials."),
    max_iterations: int = typer.Option(10, "--max-iterations", min=1, help="Proposals at most."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Stop after this many seconds."),
    target_score: Optional[float] = typer.Option(None, "--target-score", help="Stop when validation reaches it."),
    plateau: int = typer.Option(3, "--plateau", min=1, help="Stop after this many proposals without a gain."),
    allow_model_changes: bool = typer.Option(False, "--allow-model-changes", help="Let revisions change model knobs."),
    concurrency: int = typer.Option(2, "--concurrency", "-j", min=1),
    base_url: Optional[str] = typer.Option(None, "--base-url"),
    gpus: Optional[int] = typer.Option(None, "--gpus", min=0, help="GPUs passed to each task's container (default: what each task asks; 0: none)."),
    executor: str = typer.Option("local", "--executor", help="Where trials run: local or ray (stored; --resume reuses it)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="The Ray cluster for --executor ray (with --resume: a new address for the stored cluster)."),
    resume: Optional[str] = typer.Option(None, "--resume", help="Finish an interrupted experiment."),
    db: Path = typer.Option(Path(".metaopt/metaopt.duckdb"), "--db"),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object at the end."),
) -> None:
    """Optimize a harness: propose revisions from traces, keep only what the gate accepts."""
    from benchmarks.registry import load_benchmark, with_gpus
    from benchmarks.task import Task
    from evaluation.executor import make_executor
    from meta_agent.cli import _backend, _tracing, fail, user_errors
    from meta_agent.optimize import Experiment, RunConfig, new_experiment_id
    from meta_agent.splits import SplitError, parse_split, split_tasks
    from meta_agent.strategies import STRATEGIES
    from meta_agent.ledger import Ledger
    from task_agent.harness_io import load_harness, resolve_harness
    from task_agent.harness import HarnessError
    from traces.store import Store

    if budget_usd is not None and budget_usd <= 0:
        fail("--budget-usd must be more than 0")
    check_meta_model(meta_model, fail)
    if strategy not in STRATEGIES:
        fail(f"--strategy: unknown strategy '{strategy}' (known: {', '.join(STRATEGIES)})")
    with user_errors():
        if resume:
            if not db.exists():
                fail(f"--resume: no store at {db}")
            with Store(db, read_only=True) as probe:  # a bad id must not migrate or touch the file
                exp = Ledger(probe, resume).experiment() if _has_ledger(probe) else None
            if exp is None:
                fail(f"--resume: no experiment '{resume}' in {db}")
            if exp["status"] == "finished":  # nothing to resume: show what it found
                if as_json:
                    print(json.dumps(exp["result"], default=str))
                else:
                    report(exp["result"])
                return
            store = Store(db)
            cfg = RunConfig.model_validate(exp["config"]["run"])
            if ray_address:  # the cluster may have a new head since
                cfg = cfg.model_copy(update={"executor": "ray", "ray_address": ray_address})
            check_meta_model(cfg.meta_model, fail)
            start = None
            splits, exp_id = exp["splits"], resume
            tasks = with_gpus(load_benchmark(cfg.benchmark, Path(cfg.dataset) if cfg.dataset else None), cfg.gpus)
        else:
            if not benchmark or not model:
                fail("--benchmark and --model are required (or --resume EXPERIMENT)")
            try:
                fractions = parse_split(split)
                start = load_harness(resolve_harness(harness))
            except (SplitError, HarnessError) as e:
                fail(str(e) if isinstance(e, SplitError) else f"--harness: {e}")
            cfg = RunConfig(benchmark=benchmark, dataset=str(dataset) if dataset else None, model=model,
                            meta_model=meta_model, strategy=strategy, trials=trials, seed=seed, split=fractions,
                            budget_usd=budget_usd, max_trials=max_trials, max_iterations=max_iterations,
                            time_limit_s=time_limit, target_score=target_score, plateau=plateau,
                            allow_model_changes=allow_model_changes, concurrency=concurrency, base_url=base_url,
                            gpus=gpus, executor=executor, ray_address=ray_address)
            tasks = with_gpus(load_benchmark(benchmark, dataset), gpus)
            try:
                splits = split_tasks([t.id for t in tasks if isinstance(t, Task)], seed, fractions)
            except SplitError as e:
                fail(str(e))
            exp_id = new_experiment_id()
        backend = _backend(None, cfg.executor)
        runner = make_executor(cfg.executor, cfg.ray_address)
        if not resume:
            store = Store(db)
            Ledger(store, exp_id).create(cfg.benchmark, {"run": cfg.model_dump(mode="json"), "harness": harness}, splits)
        tracing = _tracing(store)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("[bold]trials"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[last]}"),
                        TimeElapsedColumn(), console=err, transient=True)
    bar = progress.add_task("trials", total=None, last="")
    experiment = Experiment(cfg, tasks, splits, start, store=store, backend=backend, tracing=tracing,
                            experiment_id=exp_id, executor=runner,
                            on_event=lambda line: progress.console.print(line, highlight=False, markup=False),
                            on_trial=lambda row: progress.update(bar, advance=1, last=f"{row.get('split')} "
                                                                 f"{row['task_id']}: {row['status']}"))
    n = len(splits["train"]) + len(splits["validation"])
    err.print(f"experiment {exp_id}: train {len(splits['train'])}, validation {len(splits['validation'])}, "
              f"test {len(splits['test'])} tasks (sealed); pre-flight: baseline {n * cfg.trials} trials, "
              f"each iteration up to {1 + (len(splits['train']) + len(splits['validation'])) * cfg.trials} trials, "
              f"test {2 * len(splits['test']) * cfg.trials}", highlight=False)
    try:
        with progress:
            result = experiment.run()
    except KeyboardInterrupt:
        Ledger(store, exp_id).finish("interrupted")
        err.print(f"interrupted: resume with `metaopt run --resume {exp_id} --db {db}`")
        raise typer.Exit(130)
    finally:
        tracing.shutdown()
        store.close()
    if as_json:
        print(json.dumps(result, default=str))
    else:
        report(result)


def _has_ledger(store) -> bool:
    return bool(store.rows("SELECT 1 FROM information_schema.tables WHERE table_name = 'experiments'"))


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


def check_meta_model(meta_model: str, fail) -> None:
    """`heuristic`, or a provider/model whose client can be built now (API key set): else one line, exit 2."""
    from meta_agent.proposers import PROPOSERS, proposer_name
    from task_agent.models import get_model
    from task_agent.models.errors import ModelConfigError

    name = proposer_name(meta_model)
    if meta_model == "llm":
        fail("--meta-model: give the llm meta-agent's model as provider/model (e.g. anthropic/claude-opus-4-1)")
    if name not in PROPOSERS:
        fail(f"--meta-model: '{meta_model}' is not available (heuristic, or provider/model for the llm meta-agent)")
    if name == "llm":
        try:
            get_model(meta_model)
        except ModelConfigError as e:
            fail(f"--meta-model: {e}")
