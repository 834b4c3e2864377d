"""End to end through the CLI, real Docker: the oracle check on the sample tasks, error rows,
timeouts, and interruption that leaves nothing behind."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest
from _docker_fixtures import metaopt

from metaopt.benchmarks.registry import load_benchmark
from metaopt.evaluation import TrialResult
from metaopt.traces.store import Store

pytestmark = pytest.mark.usefixtures("docker_image")
SAMPLES = Path(__file__).parents[1] / "metaopt" / "benchmarks" / "samples" / "terminalbench"


@pytest.fixture(scope="module", autouse=True)
def base_image(docker_image):
    """Docker and the base image, for every test that uses this."""


def harbor_task(root: Path, name: str, solve: str, test_sh: str, agent_timeout: float = 30, test_py: str | None = None) -> Path:
    d = root / name
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "task.toml").write_text(f'[agent]\ntimeout_sec = {agent_timeout}\n[verifier]\ntimeout_sec = 30\n')
    (d / "instruction.md").write_text("Create /app/done.\n")
    (d / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (d / "solution" / "solve.sh").write_text(solve)
    (d / "tests" / "test.sh").write_text(test_sh)
    return d


TB2_TEST_SH = """#!/bin/bash
apt-get update > /dev/null 2>&1
apt-get install -y curl > /dev/null 2>&1
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
source $HOME/.local/bin/env
uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""
REWARD_FROM_FILE = "mkdir -p /logs/verifier; if [ -f /app/done ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"


SOME = ["access-log-offenders", "fix-c-build", "hello-greetings", "secure-permissions"]


@pytest.mark.parametrize("how, agent, expected, only", [
    (["--agent", "oracle"], "oracle", 1.0, None),
    (["--agent", "nop"], "nop", 0.0, None),
    (["--model", "fake/solution"], "baseline@fake/solution", 1.0, None),  # the solution through the tool path
    # Doing nothing through the model path: every task is already 0 under the nop agent above, so
    # a few tasks show the traces of a model that does nothing.
    (["--model", "fake/nop", "--harness", "minimal"], "minimal@fake/nop", 0.0, SOME),
])
@pytest.mark.slow
def test_sample_tasks_oracle_scores_one_and_nop_zero(tmp_path, how, agent, expected, only):
    db = tmp_path / "s.duckdb"
    subset = ["--tasks", ",".join(only)] if only else []
    r = metaopt("eval", "--benchmark", "terminalbench-sample", *how, *subset, "--db", str(db), "--json", "-j", "2")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    ids = sorted(only or (p.name for p in SAMPLES.iterdir() if p.is_dir()))
    assert only or len(ids) >= 12
    assert sorted(t["task_id"] for t in out["tasks"]) == ids
    bad = [(t["task_id"], t["status"], t.get("error")) for t in out["tasks"] if t["score"] != expected]
    assert not bad
    assert out["mean_score"] == expected and out["agent"] == agent
    with Store(db, read_only=True) as s:
        rows = s.select(TrialResult, "run_id = ?", [out["run_id"]])
        assert len(rows) == len(ids)
        assert all(r.image.startswith("metaopt-task/") for r in rows)
        assert all(r.tests for r in rows), "per-test results recorded"
        assert s.rows("SELECT status FROM runs")[0]["status"] == "finished"
        if "--model" in how:
            assert_traces(s, rows)


def assert_traces(s: Store, rows: list[TrialResult]) -> None:
    """Each trial: one invoke_agent span, one chat span per model call, one execute_tool span per
    tool call, carrying the command and its output."""
    for row in rows:
        spans = s.rows("SELECT span_id, parent_span_id, operation_name, tool_name FROM spans "
                       "WHERE trace_id = ? ORDER BY start_ns", [row.trace_id])
        [root] = [x for x in spans if x["operation_name"] == "invoke_agent"]
        chats = [x for x in spans if x["operation_name"] == "chat"]
        tools = [x for x in spans if x["operation_name"] == "execute_tool"]
        assert len(spans) == 1 + len(chats) + len(tools)
        assert all(x["parent_span_id"] == root["span_id"] for x in chats + tools)
        calls = s.rows("SELECT count(*) AS n FROM messages WHERE trace_id = ? AND direction = 'output' "
                       "AND part_type = 'tool_call'", [row.trace_id])[0]["n"]
        assert len(tools) == calls
        if row.score == 1.0:  # fake/solution: the task's solution ran through the bash tool
            [task] = load_benchmark("terminalbench-sample", task_ids=[row.task_id])
            first = task.solution.command or task.solution.steps[0]
            bash = next(x for x in tools if x["tool_name"] == "bash")
            msgs = {m["direction"]: m["text"] for m in s.rows(
                "SELECT direction, text FROM messages WHERE span_id = ?", [bash["span_id"]])}
            assert json.loads(msgs["tool_call"]) == {"command": first}
            assert "tool_result" in msgs


def test_bad_tasks_become_error_rows_and_the_others_run(tmp_path):
    ds = tmp_path / "ds"
    harbor_task(ds, "good", "touch /app/done\n", REWARD_FROM_FILE)
    bad = harbor_task(ds, "bad-toml", "true\n", REWARD_FROM_FILE)
    (bad / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n")
    broken = harbor_task(ds, "bad-build", "true\n", REWARD_FROM_FILE)
    (broken / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nRUN exit 3\n")
    unpullable = harbor_task(ds, "bad-image", "true\n", REWARD_FROM_FILE)
    (unpullable / "environment" / "Dockerfile").write_text("FROM registry.example/nothing:1\n")
    harbor_task(ds, "no-reward", "touch /app/done\n", "echo tests ran but wrote nothing\n")
    # The real TB2 test.sh pattern, needing a Python the offline base image does not have.
    harbor_task(ds, "needs-python-313", "touch /app/done\n", TB2_TEST_SH)
    r = metaopt("eval", "--benchmark", "terminalbench", "--dataset", str(ds), "--agent", "oracle",
                "--db", str(tmp_path / "e.duckdb"), "--json")
    assert r.returncode == 1, r.stderr  # a task could not be loaded: the run says so in its exit code
    assert "1 task(s) could not be loaded (bad-toml)" in r.stderr
    by_id = {t["task_id"]: t for t in json.loads(r.stdout)["tasks"]}
    assert by_id["good"]["score"] == 1.0
    assert by_id["bad-toml"]["status"] == "error" and "timeout_sec" in by_id["bad-toml"]["error"]
    assert by_id["bad-build"]["status"] == "error" and "bad-build" in by_id["bad-build"]["error"]
    assert by_id["bad-image"]["status"] == "error" and "registry.example/nothing:1" in by_id["bad-image"]["error"]
    assert by_id["no-reward"]["status"] == "error" and by_id["no-reward"]["score"] is None
    assert "no reward" in by_id["no-reward"]["error"]
    py313 = by_id["needs-python-313"]
    assert py313["status"] == "error" and py313["score"] is None and "could not fetch" in py313["error"]


def test_agent_timeout_still_runs_the_verifier(tmp_path):
    ds = tmp_path / "ds"
    harbor_task(ds, "work-then-hang", "touch /app/done; sleep 600\n", REWARD_FROM_FILE, agent_timeout=2)
    harbor_task(ds, "hang-first", "sleep 600; touch /app/done\n", REWARD_FROM_FILE, agent_timeout=2)
    db = tmp_path / "t.duckdb"
    t0 = time.monotonic()
    r = metaopt("eval", "--benchmark", "terminalbench", "--dataset", str(ds), "--agent", "oracle", "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 120
    out = json.loads(r.stdout)
    by_id = {t["task_id"]: t for t in out["tasks"]}
    assert by_id["work-then-hang"]["score"] == 1.0
    assert (by_id["hang-first"]["status"], by_id["hang-first"]["score"]) == ("timeout", 0.0)
    with Store(db, read_only=True) as s:
        rows = {r.task_id: r for r in s.select(TrialResult, "run_id = ?", [out["run_id"]])}
    assert rows["hang-first"].agent_timed_out and rows["hang-first"].failure_mode == "agent_timeout"
    assert rows["work-then-hang"].agent_timed_out


def test_bad_input_exits_2_with_one_line(tmp_path):
    for args, needle in [
        (["--benchmark", "nope"], "unknown benchmark 'nope'"),
        (["--benchmark", "terminalbench", "--dataset", str(tmp_path / "missing")], "does not exist"),
        (["--benchmark", "terminalbench-sample", "--agent", "genius"], "unknown agent 'genius'"),
        (["--benchmark", "terminalbench-sample", "--tasks", "no-such-task"], "unknown task id 'no-such-task'"),
    ]:
        r = metaopt("eval", *args, "--db", str(tmp_path / "x.duckdb"))
        assert r.returncode == 2, (args, r.stderr)
        assert needle in r.stderr and "Traceback" not in r.stderr


def test_unreachable_daemon_is_one_line_exit_2(tmp_path):
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    r = subprocess.run([sys.executable, "-m", "metaopt.cli", "eval", "--benchmark", "terminalbench-sample",
                        "--db", str(tmp_path / "x.duckdb")], capture_output=True, check=False, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "Docker daemon" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_keeps_finished_trials_and_leaves_no_container(tmp_path, sig):
    ds = tmp_path / "ds"
    harbor_task(ds, "a-fast", "touch /app/done\n", REWARD_FROM_FILE)
    harbor_task(ds, "b-slow", "sleep 600\n", REWARD_FROM_FILE, agent_timeout=900)
    harbor_task(ds, "c-slow", "sleep 600\n", REWARD_FROM_FILE, agent_timeout=900)
    db = tmp_path / "i.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "metaopt.cli", "eval", "--benchmark", "terminalbench",
                             "--dataset", str(ds), "--agent", "oracle", "--db", str(db), "-j", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = docker.from_env()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the slow task's container runs
        if client.containers.list(filters={"label": "metaopt.task_id=b-slow"}):
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("b-slow never started")
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    with Store(db, read_only=True) as s:
        [run] = s.rows("SELECT run_id, status FROM runs")
        rows = s.select(TrialResult, "run_id = ?", [run["run_id"]])
    assert run["status"] == "interrupted"
    left = client.containers.list(all=True, filters={"label": f"metaopt.run_id={run['run_id']}"})
    assert left == []
    assert [(r.task_id, r.score) for r in rows] == [("a-fast", 1.0)]


def test_gpus_reach_docker_as_device_requests(tmp_path, base_image):
    """--gpus N asks Docker for N GPUs per container. Here (no NVIDIA runtime) Docker refuses,
    and the trial is an error row naming the cause, not a score; on a GPU host it starts."""
    has_gpu = "nvidia" in (docker.from_env().info().get("Runtimes") or {})
    r = metaopt("eval", "--benchmark", "terminalbench-sample", "--tasks", "access-log-offenders", "--agent", "oracle",
                "--gpus", "1", "--db", str(tmp_path / "g.duckdb"), "--json", timeout=300)
    [row] = json.loads(r.stdout)["tasks"]
    if has_gpu:
        assert row["status"] == "passed", row
    else:
        assert row["status"] == "error" and row["score"] is None and "gpu" in row["error"], row
