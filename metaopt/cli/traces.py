"""`metaopt traces list | show | failures | sql`: read trials and their traces from the terminal."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from metaopt.cli.common import DB, fail

app = typer.Typer(no_args_is_help=True, help="Read trials and their traces from the store.")
out = Console()


def _store(db: Path):
    from metaopt.traces.store import Store

    return Store(db, read_only=True)


@app.command("list")
def list_cmd(run: str | None = typer.Option(None, "--run", help="Only this run."),
             status: str | None = typer.Option(None, "--status", help="passed, failed, error, timeout or tampered."),
             limit: int = typer.Option(50, "--limit", min=1), db: Path = DB,
             as_json: bool = typer.Option(False, "--json")) -> None:
    """Trials, newest first."""
    from metaopt.traces.queries import list_trials

    with _store(db) as s:
        rows = list_trials(s, run_id=run, status=status, limit=limit)
    if as_json:
        print(json.dumps(rows, default=str))
        return
    t = Table()
    t.add_column("trial", overflow="fold")
    for c in ("status", "score", "failure", "tokens in/out", "cost $", "time"):
        t.add_column(c)
    for r in rows:
        score = "-" if r["score"] is None else f"{r['score']:.2f}"
        tokens = f"{r['input_tokens'] or 0}/{r['output_tokens'] or 0}"
        t.add_row(r["trial_id"], r["status"], score, r["failure_mode"] or "", tokens,
                  f"{r['cost_usd'] or 0:.4f}", f"{r['duration_s'] or 0:.1f}s")
    out.print(t)


@app.command("show")
def show_cmd(trial: str = typer.Argument(..., help="Trial id (see `metaopt traces list`)."), db: Path = DB,
             full: bool = typer.Option(False, "--full", help="Do not shorten long outputs."),
             as_json: bool = typer.Option(False, "--json")) -> None:
    """One trial's transcript: system prompt, reasoning, tool calls with arguments and outputs."""
    from metaopt.traces.queries import show_trial

    with _store(db) as s:
        try:
            data = show_trial(s, trial)
        except KeyError as e:
            fail(str(e.args[0]))
    if as_json:
        print(json.dumps(data, default=str))
        return
    cut = (lambda x: x) if full else (lambda x: x if len(x) <= 2000 else x[:1000] + f"\n[... {len(x) - 2000} chars, --full shows all ...]\n" + x[-1000:])
    row = data["trial"] or {}
    out.print(f"[bold]{trial}[/]  status {row.get('status')}  score {row.get('score')}  "
              f"failure {row.get('failure_mode') or '-'}  agent {row.get('agent')}", highlight=False)
    for e in data["transcript"]:
        if e["type"] == "system":
            out.rule("system")
            out.print(cut(_text(e["parts"])), highlight=False, markup=False)
        elif e["type"] == "message":
            out.rule(f"{e['role']} ({e['direction']})")
            for p in e["parts"]:
                if p["type"] == "reasoning":
                    out.print(f"[dim italic]{cut(p['content'])}[/]", highlight=False)
                elif p["type"] == "text":
                    out.print(cut(p["content"]), highlight=False, markup=False)
        else:
            err = " [red]ERROR[/]" if e["status"] == "ERROR" else ""
            out.rule(f"tool {e['name']}{err} ({(e['duration_ms'] or 0):.0f} ms)")
            out.print(json.dumps(e["arguments"], ensure_ascii=False), highlight=False, markup=False)
            out.print(f"[cyan]{_escape(cut(e['result'] or ''))}[/]", highlight=False)
    if row.get("test_output"):
        out.rule("verifier")
        out.print(cut(row["test_output"]), highlight=False, markup=False)
    evidence = row.get("tamper_evidence")
    if evidence:
        out.rule("[red]tamper evidence[/]")
        for e in json.loads(evidence) if isinstance(evidence, str) else evidence:
            out.print(f"{e.get('rule')}  {e.get('change')}  {e.get('path')}: {e.get('detail')}"
                      f"  sha256 {(e.get('sha256') or '-')[:12]} (pristine {(e.get('pristine_sha256') or '-')[:12]})",
                      highlight=False, markup=False)


@app.command("failures")
def failures_cmd(run: str | None = typer.Option(None, "--run"), db: Path = DB,
                 as_json: bool = typer.Option(False, "--json")) -> None:
    """Failed, errored and timed-out trials grouped by cause."""
    from metaopt.traces.queries import failures

    with _store(db) as s:
        groups = failures(s, run_id=run)
    if as_json:
        print(json.dumps(groups, default=str))
        return
    for g in groups:
        out.print(f"[bold]{g['failure_mode']}[/] x{g['count']} ({', '.join(g['statuses'])})", highlight=False)
        for tid in g["trial_ids"][:20]:
            out.print(f"  {tid}", highlight=False)


@app.command("sql")
def sql_cmd(query: str = typer.Argument(..., help="Any read-only SQL over runs, trials, spans, messages."),
            db: Path = DB, as_json: bool = typer.Option(False, "--json")) -> None:
    """Run SQL against the store (opened read-only)."""
    import duckdb

    from metaopt.traces.queries import sql

    with _store(db) as s:
        try:
            cols, rows = sql(s, query)
        except duckdb.Error as e:
            fail(f"sql: {str(e).splitlines()[0]}")
    if as_json:
        print(json.dumps([dict(zip(cols, r)) for r in rows], default=str))
        return
    t = Table(*cols)
    for r in rows:
        t.add_row(*["NULL" if v is None else str(v) for v in r])
    out.print(t)


def _text(parts: list[dict]) -> str:
    return "\n".join(p.get("content", "") for p in parts if p.get("type") == "text")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
