"""Runs and browser helpers several test modules read (registered in conftest's pytest_plugins).

`readme_run` is the README's offline command exactly as written there, in a fresh folder (so its
store is the default `.metaopt/metaopt.duckdb`), once per session: the optimizer's end-to-end
checks and the first-hour browser walk both read it. conftest puts every test that uses it in one
xdist unit, so one worker runs it once.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _docker_fixtures import metaopt

ROOT = Path(__file__).parents[1]
README_COMMAND = ("metaopt run --benchmark terminalbench-sample --harness minimal --model fake/solution "
                  "--meta-model heuristic")
EXPERIMENT = re.compile(r"exp-\d{8}-\d{6}-[0-9a-f]{4}")


@pytest.fixture(scope="session")
def readme_run(docker_image, tmp_path_factory) -> dict:
    """The README's offline run (several minutes): its printed output, the next-step commands it
    printed, its result as `run --resume EXP --json` gives a finished experiment, and its store."""
    assert README_COMMAND in (ROOT / "README.md").read_text()  # the command followed here
    tmp = tmp_path_factory.mktemp("readme")
    r = metaopt(*shlex.split(README_COMMAND)[1:], cwd=tmp, timeout=2400)
    assert r.returncode == 0, r.stderr[-3000:]
    exp = EXPERIMENT.search(r.stdout + r.stderr)
    assert exp, r.stdout[-2000:]
    result = metaopt("run", "--resume", exp.group(0), "--json", cwd=tmp, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    nxt = {m.group(1): m.group(0) for m in re.finditer(r"metaopt (report|diagnose|ui|export)\b[^\n]*", r.stdout)}
    return {"tmp": tmp, "db": tmp / ".metaopt" / "metaopt.duckdb", "experiment": exp.group(0), "stdout": r.stdout,
            "result": json.loads(result.stdout), "next": nxt}


@contextmanager
def ui_server(*args: str, cwd: Path | None = None) -> Iterator[str]:
    """`metaopt ui ARGS --port 0` in a subprocess; yields the address it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "metaopt.cli", "ui", *args, "--port", "0"],
                            stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        line = proc.stderr.readline() if proc.stderr else ""
        m = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert m, line
        yield m.group(0)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def page(chromium):
    """A fresh browser page; the test fails on any script error the page raised."""
    pg = chromium.new_page(viewport={"width": 1300, "height": 900})
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    pg.close()
    assert not errors, errors
