"""`metaopt run -c preset.yaml -c key=value`: presets merged in order, flags given on the command
line over them; a bad preset file or key is one line naming it, exit 2, and nothing is written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from metaopt.core.errors import UserError
from metaopt.meta_agent.config import RunConfig, load_presets


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metaopt.cli", "run", *args], capture_output=True, check=False,
                          text=True, timeout=120)


def test_presets_merge_in_order_nested_settings_key_by_key(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("benchmark: terminalbench-sample\nmodel: fake/solution\nharness: minimal\ntrials: 3\n"
                    "gate: {alpha: 0.1, select_looks: 2}\n")
    got = load_presets([str(base), "trials=2", "gate.alpha=0.05", "bilevel.builtins=[tabu]"])
    assert got == {"benchmark": "terminalbench-sample", "model": "fake/solution", "harness": "minimal", "trials": 2,
                   "gate": {"alpha": 0.05, "select_looks": 2}, "bilevel": {"builtins": ["tabu"]}}
    cfg = RunConfig(**{k: v for k, v in got.items() if k != "harness"})
    assert (cfg.trials, cfg.gate.alpha, cfg.gate.select_looks, cfg.bilevel.builtins) == (2, 0.05, 2, ["tabu"])


@pytest.mark.parametrize("text, words", [
    ("trialz: 3\n", "trialz: not a RunConfig field"),
    ("trials: 0\n", "trials: Input should be greater than or equal to 1"),
    ("gate: {alfa: 1}\n", "gate.alfa: not a RunConfig field"),
    ("- trials\n", "a preset is a mapping of RunConfig fields"),
    ("trials: [\n", "not YAML (line 2)"),
    ("harness: [minimal]\n", "harness: expected a string"),
])
def test_a_bad_preset_file_is_one_line_naming_the_file_and_the_field(tmp_path, text, words):
    preset = tmp_path / "p.yaml"
    preset.write_text(text)
    with pytest.raises(UserError) as e:
        load_presets([str(preset)])
    assert e.value.line().startswith(f"{preset}: ") and words in e.value.line()


@pytest.mark.parametrize("args, words", [
    (["-c", "NOPE.yaml"], "NOPE.yaml: no such preset file (a -c value is a YAML file or KEY=VALUE)"),
    (["-c", "trialz=2"], "-c: trialz: not a RunConfig field"),
    (["-c", "gate.alpha=2"], "-c: gate.alpha: Input should be less than 1"),
    (["-c", "model=fake/solution"], "--benchmark and --model are required"),
])
def test_a_bad_preset_on_the_command_line_is_one_line_and_exit_2(tmp_path, args, words):
    r = run("--db", str(tmp_path / "s.duckdb"), *args)
    assert r.returncode == 2 and words in r.stderr.strip().splitlines()[-1], r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "s.duckdb").exists()  # nothing ran, nothing written


def test_a_preset_fills_the_run_and_a_flag_given_wins_over_it(tmp_path):
    """A preset alone names the benchmark, the model and the meta-model (here one nobody registered,
    so the run stops at that check, before anything runs); a --meta-model given wins over it."""
    preset = tmp_path / "p.yaml"
    preset.write_text("benchmark: terminalbench-sample\nmodel: fake/solution\nmeta_model: from-preset\n")
    db = str(tmp_path / "s.duckdb")
    r = run("-c", str(preset), "--db", db)
    assert r.returncode == 2 and "from-preset" in r.stderr and "--meta-model" in r.stderr, r.stderr
    r = run("-c", str(preset), "-c", "meta_model=from-key", "--db", db)
    assert r.returncode == 2 and "from-key" in r.stderr, r.stderr
    r = run("-c", str(preset), "--meta-model", "from-flag", "-c", "meta_model=from-key", "--db", db)
    assert r.returncode == 2 and "from-flag" in r.stderr and "from-key" not in r.stderr, r.stderr
    assert not (tmp_path / "s.duckdb").exists()
