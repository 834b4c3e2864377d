"""`metaopt run` end to end, offline: the minimal harness, the fake/solution model and the
heuristic proposer on generated tasks whose solutions need more turns than `minimal` allows.
Every decision must be readable from the store, and kill -9 + --resume must re-run nothing."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest
from _docker_fixtures import metaopt
from _step_tasks import make_tasks

from metaopt.traces.store import Store

pytestmark = pytest.mark.usefixtures("docker_image")


def run(*args: str) -> subprocess.CompletedProcess:
    return metaopt("run", *args, timeout=1200)


def args(ds: Path, db: Path, iterations: int = 3) -> list[str]:
    return ["--benchmark", "terminalbench", "--dataset", str(ds), "--harness", "minimal", "--model", "fake/solution",
            "--meta-model", "heuristic", "--trials", "2", "--split", "0.34,0.33,0.33", "--max-iterations", str(iterations),
            "--db", str(db), "--json"]


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_readme_run_with_greedy_improves_the_sealed_test_score_and_explains_itself(readme_run):
    """The README's offline command as written (tests/_shared_runs.py); its strategy is the default, greedy."""
    assert_improves_and_explains(readme_run["result"], readme_run["db"], "greedy")


@pytest.mark.slow
def test_heuristic_run_with_pareto_improves_the_sealed_test_score_and_explains_itself(tmp_path):
    db = tmp_path / "r.duckdb"
    r = run(*args(make_tasks(tmp_path / "ds"), db), "--strategy", "pareto")
    assert r.returncode == 0, r.stderr
    assert_improves_and_explains(json.loads(r.stdout), db, "pareto")


def assert_improves_and_explains(out: dict, db: Path, strategy: str) -> None:
    assert out["accepted"] >= 1 and out["best_test_score"] > out["baseline_test_score"]
    assert Path(out["progress_png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Store(db, read_only=True) as s:
        cands = s.rows("SELECT candidate_id, status, rationale, diff FROM candidates ORDER BY iteration")
        decisions = s.rows("SELECT candidate_id, stage, outcome, reason, rule FROM gate_decisions")
        exp = s.rows("SELECT splits, config FROM experiments")[0]
        splits = json.loads(exp["splits"])
        assert json.loads(exp["config"])["run"]["strategy"] == strategy
        shown = s.rows("SELECT DISTINCT split FROM trials WHERE candidate_id != ? AND split = 'test'",
                       [cands[0]["candidate_id"]])
    assert cands[0]["status"] == "baseline"
    kept = [c for c in cands if c["status"] == "accepted"]
    assert out["best_candidate"] == kept[-1]["candidate_id"]
    assert "turn limit" in kept[0]["rationale"] and "max_turns" in kept[0]["diff"]
    accepted = [d for d in decisions if d["outcome"] == "accept"]
    assert accepted and all("fresh gain" in d["reason"] and "alpha_j" in d["reason"] and "inconclusive" in d["rule"]
                            for d in accepted)
    assert {d["stage"] for d in decisions} >= {"screen", "select", "confirm"}
    assert out["best_validation_gain"]["note"].startswith("selection gain is optimistic")
    assert set(splits) == {"train", "validation", "test"} and all(splits.values())
    assert len(shown) <= 1  # only the final best is evaluated on test


@pytest.mark.slow
def test_kill_9_then_resume_reruns_nothing(tmp_path):
    prefix = f"kill9-{secrets.token_hex(3)}"  # task ids no other run on this daemon has
    # 6 tasks (2 a split): every train split holds a 12-step task, so the heuristic has a proposal to make
    ds, db = make_tasks(tmp_path / "ds", n_long=5, n_short=1, prefix=prefix), tmp_path / "k.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "metaopt.cli", "run", *args(ds, db, iterations=1)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = docker.from_env()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # kill once the first proposal is being evaluated
        listed = client.api.containers(filters={"label": "metaopt.managed=true"})  # no per-container inspect: they come and go
        if any("/c1:" in (c.get("Labels") or {}).get("metaopt.run_id", "")
               and (c.get("Labels") or {}).get("metaopt.task_id", "").startswith(prefix) for c in listed):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the run never reached its first proposal")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with Store(db) as s:
        [exp] = s.rows("SELECT experiment_id, status FROM experiments")
    for c in client.api.containers(all=True, filters={"label": "metaopt.managed=true"}):  # what kill -9 left
        if (c.get("Labels") or {}).get("metaopt.run_id", "").startswith(exp["experiment_id"]):
            client.api.remove_container(c["Id"], force=True)
    with Store(db) as s:
        before = {r["trial_id"]: r["finished_at"] for r in s.rows("SELECT trial_id, finished_at FROM trials")}
    assert exp["status"] == "running" and before
    r = run("--resume", exp["experiment_id"], "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["experiment_id"] == exp["experiment_id"]
    with Store(db, read_only=True) as s:
        after = {r["trial_id"]: r["finished_at"] for r in s.rows("SELECT trial_id, finished_at FROM trials")}
        status = s.rows("SELECT status FROM experiments")[0]["status"]
    assert status == "finished"
    assert all(after[t] == before[t] for t in before)  # nothing that finished ran again
    assert len(after) > len(before)
    again = run("--resume", exp["experiment_id"], "--db", str(db), "--json")  # finished: just the result
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(r.stdout)


@pytest.mark.parametrize("extra, needle", [
    (["--strategy", "annealing"], "unknown strategy 'annealing'"),
    (["--meta-model", "anthropic/claude-opus-4-1"], "--meta-model"),
    (["--split", "0.9,0.1,0.0"], "--split"),
    (["--budget-usd", "0"], "--budget-usd"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, extra, needle):
    db = tmp_path / "b.duckdb"
    r = run("--benchmark", "terminalbench-sample", "--model", "fake/solution", *extra, "--db", str(db))
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr
    assert not db.exists()


@pytest.mark.parametrize("extra, needle", [
    (["--trials", "0"], "--trials: Input should be greater than or equal to 1"),
    (["--max-iterations", "0"], "--max-iterations"),
    (["--harness", "no-such-harness"], "--harness"),
])
def test_bad_numbers_and_names_are_exactly_one_line(tmp_path, extra, needle):
    db = tmp_path / "b.duckdb"
    r = run("--benchmark", "terminalbench-sample", "--model", "fake/solution", *extra, "--db", str(db))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr
    assert not db.exists()


def test_sigterm_stops_the_run_like_ctrl_c(tmp_path):
    """SIGTERM: exit 130, the experiment is `interrupted` (resumable), and no container is left."""
    prefix = f"sigterm-{secrets.token_hex(3)}"  # task ids no other run on this daemon has
    ds, db = make_tasks(tmp_path / "ds", n_long=3, n_short=3, prefix=prefix), tmp_path / "t.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "metaopt.cli", "run", *args(ds, db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = docker.from_env()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # terminate while this run's trials run
        if any((c.get("Labels") or {}).get("metaopt.task_id", "").startswith(prefix)
               for c in client.api.containers(filters={"label": "metaopt.managed=true"})):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the run never started a trial")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr and "Traceback" not in stderr
    with Store(db, read_only=True) as s:
        [exp] = s.rows("SELECT experiment_id, status FROM experiments")
    assert exp["status"] == "interrupted"
    left = [c for c in client.api.containers(all=True, filters={"label": "metaopt.managed=true"})
            if (c.get("Labels") or {}).get("metaopt.run_id", "").startswith(exp["experiment_id"])]
    assert left == []


def test_resume_of_unknown_experiment_is_exit_2(tmp_path):
    db = tmp_path / "u.duckdb"
    Store(db).close()
    r = run("--resume", "exp-nope", "--db", str(db))
    assert r.returncode == 2 and "no experiment 'exp-nope'" in r.stderr


def test_split_that_leaves_a_set_empty(tmp_path):
    ds = make_tasks(tmp_path / "ds", n_long=1, n_short=1)
    r = run(*args(ds, tmp_path / "e.duckdb"))
    assert r.returncode == 2 and "empty" in r.stderr
    assert not (tmp_path / "e.duckdb").exists()


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_sample_benchmark_run_from_the_readme_improves_the_test_score(readme_run):
    out, db = readme_run["result"], readme_run["db"]
    assert out["best_test_score"] > out["baseline_test_score"] and out["accepted"] >= 1
    with Store(db, read_only=True) as s:
        rows = s.rows("SELECT c.status, g.stage, g.outcome, g.reason FROM candidates c JOIN gate_decisions g "
                      "USING (candidate_id) WHERE c.status = 'accepted' AND g.stage = 'confirm' AND g.outcome = 'accept'")
    assert rows and all("fresh gain" in x["reason"] for x in rows)
