"""`metaopt benchmarks check`: the task CI Terminal-Bench 3 runs on every task. The task's own
solution must pass (oracle), doing nothing must fail (nop), and its adversarial solution must
fail (cheat, where the task has a `cheat/solve.sh`). A task whose trials error is not checked."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from metaopt.cli.common import DB, backend, err, progress, sigterm_as_interrupt, split_ids

EXPECT = {"oracle": "passed", "nop": "failed", "cheat": "failed"}


def check_cmd(
    benchmark: str = typer.Option("terminalbench", "--benchmark", "-b", help="Benchmark name (see `metaopt benchmarks list`)."),
    dataset: Path | None = typer.Option(None, "--dataset", help="Task directory or directory of tasks."),
    tasks: str | None = typer.Option(None, "--tasks", help="Comma-separated task ids (default: all)."),
    concurrency: int = typer.Option(2, "--concurrency", "-j", help="Trials running at once."),
    image_map: Path | None = typer.Option(None, "--image-map", help="YAML file mapping unpullable FROM images to local ones."),
    db: Path = DB,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object with the verdicts on stdout."),
) -> None:
    """Run oracle (must pass), nop (must fail) and cheat (must fail, where a task has one) on every
    task and print one row per task; exits 1 when a task fails its check."""
    from metaopt.api import prepare_eval, run_evaluation
    from metaopt.benchmarks.task import Task
    from metaopt.evaluation import new_run_id
    from metaopt.evaluation.config import EvalConfig
    from metaopt.traces.store import Store

    sigterm_as_interrupt()
    loaded: dict[str, list] = {}
    for agent in EXPECT:
        cfg = EvalConfig(benchmark=benchmark, dataset=dataset, tasks=split_ids(tasks), agent=agent,
                         concurrency=concurrency)
        task_list, the_agent = prepare_eval(cfg)
        if agent == "cheat":
            task_list = [t for t in task_list if not isinstance(t, Task) or t.cheat is not None]
        loaded[agent] = [cfg, task_list, the_agent]
    docker, store = backend(image_map), Store(db)
    results: dict[str, dict[str, tuple[str, float | None, str]]] = {}
    try:
        for agent, (cfg, task_list, the_agent) in loaded.items():
            if not task_list:
                continue
            with progress(f"check / {agent}", transient=as_json) as view:
                bar = view.add_task(agent, total=len(task_list), last="")
                res = run_evaluation(cfg, task_list, the_agent, store=store, backend=docker, run_id=new_run_id(),
                                     on_trial=lambda r, view=view, bar=bar: view.update(bar, advance=1, last=f"{r.task_id}: {r.status}"))
            results[agent] = {r.task_id: (r.status, r.score, r.error or r.failure_mode or "") for r in res.rows}
    except KeyboardInterrupt:
        err.print(f"interrupted: finished trials are in {db}")
        raise typer.Exit(130) from None
    finally:
        store.close()
    rows = _verdicts(results)
    if as_json:
        print(json.dumps({"benchmark": benchmark, "tasks": rows}))
    else:
        _table(rows)
    if any(r["verdict"] != "ok" for r in rows):
        raise typer.Exit(1)


def _verdicts(results: dict[str, dict[str, tuple[str, float | None, str]]]) -> list[dict]:
    rows = []
    for task in sorted({t for per in results.values() for t in per}):
        row: dict = {"task": task}
        bad = []
        for agent, want in EXPECT.items():
            got = results.get(agent, {}).get(task)
            row[agent] = None if got is None else {"status": got[0], "score": got[1], "note": got[2][:300]}
            if got is None:
                if agent != "cheat":
                    bad.append(f"{agent} did not run")
            elif got[0] == "error":
                bad.append(f"{agent} errored: {got[2][:120]}")
            elif (got[0] == "passed") != (want == "passed"):
                bad.append(f"{agent} {got[0]} (must be {want})")
        row["verdict"] = "ok" if not bad else "; ".join(bad)
        rows.append(row)
    return rows


def _table(rows: list[dict]) -> None:
    t = Table(title="task CI: oracle must pass, nop and cheat must fail")
    for c in ("task", "oracle", "nop", "cheat", "verdict"):
        t.add_column(c, overflow="fold")
    for r in rows:
        cells = ["-" if r[a] is None else f"{r[a]['status']} {'' if r[a]['score'] is None else format(r[a]['score'], '.2f')}"
                 for a in EXPECT]
        t.add_row(r["task"], *cells, "[green]ok[/]" if r["verdict"] == "ok" else f"[red]{r['verdict']}[/]")
    Console().print(t)
    bad = sum(r["verdict"] != "ok" for r in rows)
    Console().print(f"{len(rows) - bad} of {len(rows)} tasks pass their check" + (f"; {bad} do not" if bad else ""))
