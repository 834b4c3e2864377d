"""A store written by the last release before the import rename (5f0e0a2: one finished optimizer
experiment and one eval run on LocalSandbox step tasks, made by running that checkout) opens with
today's code: it migrates forward, its typed rows read back, and the CLI shows and resumes it."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from metaopt.explorer import queries as explorer
from metaopt.meta_agent.records import Candidate, GateDecision
from metaopt.traces.migrations import MIGRATIONS
from metaopt.traces.store import Store

OLD = Path(__file__).parent / "data" / "store-0.1.0-5f0e0a2.duckdb.gz"


@pytest.fixture
def old_store(tmp_path) -> Path:
    db = tmp_path / "old.duckdb"
    db.write_bytes(gzip.decompress(OLD.read_bytes()))
    return db


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metaopt", *args], capture_output=True, text=True, check=False,
                          timeout=120, cwd=Path(__file__).parents[1])


def test_an_old_store_migrates_forward_and_reads_back_typed(old_store):
    with Store(old_store) as store:
        applied = [r["name"] for r in store.rows("SELECT name FROM schema_migrations ORDER BY name")]
        assert applied == sorted(name for name, _ in MIGRATIONS)
        cands = store.select(Candidate, "experiment_id = ?", ["exp-old-release"], order="iteration")
        decisions = store.select(GateDecision, "experiment_id = ?", ["exp-old-release"])
        view = explorer.experiment(store, "exp-old-release")
    assert [c.status for c in cands] == ["baseline", "accepted"]
    assert "max_turns" in cands[1].diff and decisions[-1].outcome == "accept"
    assert view["experiment"]["result"]["accepted"] == 1


def test_the_cli_lists_its_trials_and_resumes_the_finished_experiment(old_store):
    r = cli("traces", "list", "--db", str(old_store), "--json")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) >= 2
    r = cli("run", "--resume", "exp-old-release", "--db", str(old_store), "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["best_candidate"] == "exp-old-release/c1" and report["best_test_score"] == 1.0
