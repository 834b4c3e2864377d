"""`metaopt traces mechanisms EXPERIMENT`: the bilevel strategy's mechanisms in the terminal (the
explorer's /api/mechanisms view): status, ladder, hook calls, judgement, active set, Level 2."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from metaopt.cli.common import DB
from metaopt.cli.views import JSON, out, print_json, view


def mechanisms_cmd(experiment: str = typer.Argument(..., help="Experiment id."), db: Path = DB,
                   source: bool = typer.Option(False, "--source", help="Also print each mechanism's source."),
                   as_json: bool = JSON) -> None:
    """Search mechanisms of a bilevel experiment: source, validation steps, hook calls, judgement."""
    from metaopt.explorer.mechanisms import mechanisms

    data = view(db, lambda s: mechanisms(s, experiment))
    if as_json:
        return print_json(data)
    for m in data["mechanisms"]:
        out.print(f"[bold]{m['name']}[/] {m['origin']} {m['mechanism_hash'][:12]}: {m['status']}"
                  + (f" ({escape(m['status_reason'])})" if m["status_reason"] else ""), highlight=False)
        for c in m["checks"]:
            out.print(f"  {c['step']:<9} {'pass' if c['ok'] else 'FAIL'}  {escape(c['reason'][:200])}", highlight=False)
        if m["calls"]:
            out.print("  calls: " + ", ".join(f"{k} x{v}" for k, v in m["calls"].items()), highlight=False)
        if m["judgement"]:
            out.print(f"  judged {m['judgement']['outcome']}: {escape(m['judgement']['reason'])}", highlight=False)
        if source:
            out.print(escape(m["source"]), highlight=False)
    names = {m["mechanism_hash"]: m["name"] for m in data["mechanisms"]}
    for s in data["active_sets"]:
        out.print(f"active from iteration {s['iteration']}: {', '.join(names.get(h, h[:12]) for h in s['hashes']) or '-'}"
                  f"  ({escape(s['reason'])})", highlight=False)
    for x in data["level2_sessions"]:
        out.print(f"level 2 round {x['round']} (iteration {x['iteration']}, {x['model']}): {x['outcome']}"
                  + (f": {escape(' | '.join(x['errors']))}" if x["errors"] else ""), highlight=False)
