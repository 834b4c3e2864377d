"""`metaopt run --parallel 3` killed (kill -9) with three candidates in flight: `--resume` finishes
it with no trial run twice and no container of it left behind."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import time

import docker
import pytest
from _docker_fixtures import metaopt
from _step_tasks import make_tasks

from metaopt.traces.store import Store

pytestmark = pytest.mark.usefixtures("docker_image")


def test_kill_9_with_three_candidates_in_flight_then_resume(tmp_path):
    prefix = f"swarm9-{secrets.token_hex(3)}"  # task ids no other run on this daemon has
    ds, db = make_tasks(tmp_path / "ds", n_long=3, n_short=1, prefix=prefix), tmp_path / "k.duckdb"
    args = ["--benchmark", "terminalbench", "--dataset", str(ds), "--harness", "minimal",
            "--model", "fake/slow:0.1:solution", "--meta-model", "placebo:0.2", "--trials", "1",
            "--split", "0.5,0.25,0.25", "--max-iterations", "3", "--plateau", "10", "--parallel", "3",
            "--db", str(db), "--json"]
    proc = subprocess.Popen([sys.executable, "-m", "metaopt.cli", "run", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = docker.from_env()
    deadline, flying = time.monotonic() + 300, set()
    while time.monotonic() < deadline:  # kill once three candidates have trials running at once
        listed = client.api.containers(filters={"label": "metaopt.managed=true"})
        labels = [c.get("Labels") or {} for c in listed]
        flying = {lb.get("metaopt.run_id", "").split(":")[0] for lb in labels
                  if lb.get("metaopt.task_id", "").startswith(prefix) and "/c0:" not in lb.get("metaopt.run_id", "")}
        if len(flying) >= 3:
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail(f"three candidates were never in flight at once (saw {sorted(flying)})")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with Store(db, read_only=True) as s:
        [exp] = s.rows("SELECT experiment_id, status FROM experiments")
        pending = s.rows("SELECT candidate_id FROM candidates WHERE status = 'pending'")
        before = {r["trial_id"]: r["finished_at"] for r in s.rows("SELECT trial_id, finished_at FROM trials")}
    assert exp["status"] == "running" and len(pending) == 3
    r = metaopt("run", "--resume", exp["experiment_id"], "--db", str(db), "--json", timeout=600)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["experiment_id"] == exp["experiment_id"]
    with Store(db, read_only=True) as s:
        after = {r["trial_id"]: r["finished_at"] for r in s.rows("SELECT trial_id, finished_at FROM trials")}
        keys = s.rows("SELECT candidate_id, split, task_id, attempt, count(*) AS n FROM trials "
                      "GROUP BY ALL HAVING count(*) > 1")
        status = s.rows("SELECT status FROM experiments")[0]["status"]
        cands = s.rows("SELECT candidate_id, status FROM candidates WHERE iteration > 0")
    assert status == "finished" and keys == []  # no trial ran twice
    assert all(after[t] == before[t] for t in before) and len(after) > len(before)
    assert len(cands) == 3 and all(c["status"] != "pending" for c in cands)
    left = [c for c in client.api.containers(all=True, filters={"label": "metaopt.managed=true"})
            if (c.get("Labels") or {}).get("metaopt.run_id", "").startswith(exp["experiment_id"])]
    assert left == []  # what kill -9 left, --resume removed
