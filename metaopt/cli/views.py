"""What the explorer's views in the terminal share (cli.ui, cli.mechanisms, cli.diagnose): the
console, the `--json` option, and running one view against a read-only snapshot of the store."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from metaopt.cli.common import fail

out = Console()
JSON = typer.Option(False, "--json", help="Print the view's JSON (what the web app's endpoint serves).")


def view(db: Path, fn: Callable[[Any], Any]) -> Any:
    """Run one view against the store read-only; bad input is one line and exit 2."""
    from metaopt.explorer.source import Source
    from metaopt.traces.store import StoreError

    source = Source(db)
    try:
        with source.open() as (store, _):
            return fn(store)
    except StoreError as e:
        fail(str(e))
    except KeyError as e:
        fail(str(e.args[0]))
    finally:
        source.close()


def print_json(data: Any) -> None:
    print(json.dumps(data, default=str))
