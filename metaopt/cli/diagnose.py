"""`metaopt diagnose RUN|EXPERIMENT [--model M] [--json]` (failure clusters, stored in the store)
and `metaopt report EXPERIMENT --html FILE` (one self-contained HTML page)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from metaopt.cli.common import DB, fail

out = Console(soft_wrap=True)


def diagnose_cmd(ref: str = typer.Argument(..., help="Experiment id or run id (see `metaopt traces experiments`)."),
                 model: str | None = typer.Option(None, "--model", help="A model that writes a short diagnosis per "
                                                  "cluster, citing span ids (e.g. local/qwen2.5-coder-1.5b)."),
                 db: Path = DB, as_json: bool = typer.Option(False, "--json", help="Print the clusters as JSON.")) -> None:
    """Group the failing trials into clusters by signature (failure mode, normalised last error, tool
    and exit status, where in the episode), largest first; store them, with --model a diagnosis each."""
    from metaopt.traces.diagnosis import diagnose
    from metaopt.traces.store import Store

    if not db.exists():
        fail(f"store {db} does not exist")
    with Store(db) as store:
        data = diagnose(store, ref, model)
    if as_json:
        print(json.dumps(data, default=str))
        return
    out.print(f"[bold]{data['kind']} {escape(ref)}[/]: {data['failing']} failing trial(s) in "
              f"{len(data['clusters'])} cluster(s)", highlight=False)
    for c in data["clusters"]:
        tasks = ", ".join(f"{t} x{n}" for t, n in list(c["tasks"].items())[:6])
        cands = ", ".join(f"{k.rsplit('/', 1)[-1]} x{n}" for k, n in c["candidates"].items())
        out.print(f"\n[bold]{c['size']:>4}[/]  {escape(c['label'])}  [dim]({c['cluster_id']})[/]", highlight=False)
        out.print(f"      tasks: {escape(tasks)}{' ...' if len(c['tasks']) > 6 else ''}", highlight=False)
        out.print(f"      by: {escape(cands)}", highlight=False)
        for e in c["examples"][:3]:
            out.print(f"      e.g. {escape(e['trial_id'])}" + (f"  span {e['span_id']}" if e["span_id"] else ""),
                      highlight=False)
        d = c["diagnosis"]
        if d:
            out.print(f"      [italic]{escape(d['summary'])}[/] [dim]({escape(d['model'])})[/]", highlight=False)
            for claim in d["claims"]:
                out.print(f"      - {escape(claim['text'])} [dim][{', '.join(claim['spans'])}][/]", highlight=False)
            if d["dropped"]:
                out.print(f"      [dim]{d['dropped']} claim(s) dropped: they cited no span of this cluster[/]")


def report_cmd(experiment: str = typer.Argument(..., help="Experiment id."),
               html: Path = typer.Option(..., "--html", help="The HTML file to write."), db: Path = DB) -> None:
    """Write one self-contained HTML page (no server, no network) telling the experiment's story:
    baseline, candidates, gate decisions, failure clusters, the winning diff, the sealed test."""
    from metaopt.cli.views import view
    from metaopt.explorer.report import render

    page = view(db, lambda s: render(s, experiment))
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_text(page, encoding="utf-8")
    out.print(f"wrote {escape(str(html))} ({len(page.encode()) / 1024:.0f} KiB)", highlight=False)
