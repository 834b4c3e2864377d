"""`metaopt run --gate-set / --bilevel-set KEY=VALUE`: settings checked before anything runs; a bad
one is one line naming the flag and the key, exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from metaopt.cli.run import parse_sets
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.sequential import SequentialRule


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metaopt.cli", "run", "--benchmark", "terminalbench-sample",
                           "--model", "fake/solution", *args], capture_output=True, check=False, text=True, timeout=120)


@pytest.mark.parametrize("args, words", [
    (["--gate-set", "select_looks"], "--gate-set: expected KEY=VALUE, got 'select_looks'"),
    (["--gate-set", "nope=1"], "--gate-set: nope: Extra inputs are not permitted"),
    (["--gate-set", "alpha=2"], "--gate-set: alpha: Input should be less than 1"),
    (["--gate-set", "select_looks=[1"], "--gate-set: select_looks: cannot read the value '[1'"),
    (["--bilevel-set", "nope=1"], "--bilevel-set: nope: Extra inputs are not permitted"),
])
def test_a_bad_setting_is_one_line_naming_flag_and_key(tmp_path, args, words):
    r = run("--db", str(tmp_path / "s.duckdb"), *args)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].endswith(words), r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "s.duckdb").exists()  # nothing ran, nothing written


def test_gate_settings_reach_the_run_config():
    sets = parse_sets(["alpha=0.1", "select_looks=2", "shuffle_tasks=false"], SequentialRule, "--gate-set")
    assert sets == {"alpha": 0.1, "select_looks": 2, "shuffle_tasks": False}
    gate = RunConfig(benchmark="b", model="fake/solution", gate=sets).gate
    assert (gate.alpha, gate.select_looks, gate.shuffle_tasks, gate.min_effect) == (0.1, 2, False, 0.05)
    stored = RunConfig.model_validate(RunConfig(benchmark="b", model="fake/solution", gate=sets).model_dump(mode="json"))
    assert stored.gate == gate  # what --resume reads back
