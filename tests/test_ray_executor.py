"""`--executor ray` on a real two-node Ray cluster on this machine (tests/_ray_cluster.py), with
real Docker: the same scores as local, spans and rows back on the driver, a killed worker
retried, Ctrl-C leaving no container, budget stops, the optimizer end to end and resumed."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import docker
import pytest
from _ray_cluster import RayCluster
from _step_tasks import make_tasks

from metaopt.evaluation.ray_node import DISPATCH, cleanup_on_node
from metaopt.traces.store import Store

pytestmark = pytest.mark.usefixtures("docker_image")
SAMPLES = Path(__file__).parents[1] / "metaopt" / "benchmarks" / "samples" / "terminalbench"


@pytest.fixture(scope="module")
def ray_cluster(docker_image, ray_start, tmp_path_factory):
    cache = tmp_path_factory.mktemp("node-cache")
    with ray_start(head_cpus=1, env={"METAOPT_NODE_CACHE": str(cache)}) as c:
        c.add_node(num_cpus=1, resources={"second": 1})
        yield c


def cli(ray_cluster: RayCluster, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metaopt.cli", *args], capture_output=True, text=True,
                          check=False, timeout=timeout, env=ray_cluster.env)


def start(ray_cluster: RayCluster, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "metaopt.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ray_cluster.env)


def on_ray(ray_cluster: RayCluster) -> list[str]:
    return ["--executor", "ray", "--ray-address", ray_cluster.address]


def slow_task(root: Path, name: str, seconds: int, dockerfile: str = "FROM debian:bookworm-slim\nWORKDIR /app\n") -> Path:
    """A Harbor task whose solution takes `seconds`, then passes."""
    d = root / name
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "task.toml").write_text("[agent]\ntimeout_sec = 120\n[verifier]\ntimeout_sec = 30\n")
    (d / "instruction.md").write_text("Create /app/done.\n")
    (d / "environment" / "Dockerfile").write_text(dockerfile)
    (d / "solution" / "solve.sh").write_text(f"sleep {seconds}\ntouch /app/done\n")
    (d / "tests" / "test.sh").write_text("mkdir -p /logs/verifier; if [ -f /app/done ]; then echo 1; else echo 0; "
                                         "fi > /logs/verifier/reward.txt\n")
    return root


def containers(task_ids: list[str]) -> list[dict]:
    """Containers of these (unique) task ids; the low-level list: no per-container inspect that
    a container removed meanwhile would fail."""
    api = docker.from_env().api
    return [c for t in task_ids for c in api.containers(all=True, filters={"label": f"metaopt.task_id={t}"})]


def remove(task_ids: list[str]) -> None:
    """What a failed test's killed driver left (the ids are unique to the test)."""
    api = docker.from_env().api
    for c in containers(task_ids):
        try:
            api.remove_container(c["Id"], force=True)
        except docker.errors.NotFound:
            pass


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


ALL_SAMPLES = sorted(p.name for p in SAMPLES.iterdir() if p.is_dir())


@pytest.mark.slow
@pytest.mark.parametrize("agent, expected, ids", [("oracle", 1.0, ALL_SAMPLES), ("nop", 0.0, ALL_SAMPLES[::4])])
def test_sample_set_scores_the_same_on_ray_as_locally(ray_cluster, tmp_path, agent, expected, ids):
    """Every sample oracle scores 1 on Ray as locally; nop's 0 is checked on every fourth task (the
    full nop set runs locally in test_eval_e2e; here it only shows a failing test travels back)."""
    db = tmp_path / "s.duckdb"
    r = cli(ray_cluster, "eval", "--benchmark", "terminalbench-sample", "--agent", agent, "-j", "2", "--db", str(db),
            "--json", "--tasks", ",".join(ids), *on_ray(ray_cluster))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert sorted(t["task_id"] for t in out["tasks"]) == ids
    assert [(t["task_id"], t["status"], t.get("error")) for t in out["tasks"] if t["score"] != expected] == []
    with Store(db, read_only=True) as s:
        hw = [json.loads(r["hardware"]) for r in s.rows("SELECT hardware FROM trials WHERE run_id = ?",
                                                          [out["run_id"]])]
    assert all(h["hostname"] and h["fingerprint"] and h["ray_node_id"] for h in hw)
    assert len({h["ray_node_id"] for h in hw}) == 2, "trials ran on both nodes"


def test_traced_agent_spans_come_back_to_the_driver(ray_cluster, tmp_path):
    db = tmp_path / "t.duckdb"
    tasks = ["hello-greetings", "fix-c-build"]
    runs = {}
    for how in (on_ray(ray_cluster), ["--executor", "local"]):
        r = cli(ray_cluster, "eval", "--benchmark", "terminalbench-sample", "--model", "fake/solution", "--tasks",
                ",".join(tasks), "--db", str(db), "--json", *how)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["mean_score"] == 1.0
        runs[how[1]] = out["run_id"]
    with Store(db, read_only=True) as s:
        def shape(run_id):
            return s.rows("SELECT t.task_id, s.name, count(*) AS n, count(DISTINCT m.text) AS texts FROM trials t "
                          "JOIN spans s ON s.trial_id = t.trial_id LEFT JOIN messages m ON m.span_id = s.span_id "
                          "WHERE t.run_id = ? GROUP BY ALL ORDER BY ALL", [run_id])
        assert shape(runs["ray"]) and shape(runs["ray"]) == shape(runs["local"])
        traced = s.rows("SELECT count(*) AS n FROM trials t JOIN spans s ON s.trace_id = t.trace_id "
                        "WHERE t.run_id = ? AND s.operation_name = 'invoke_agent'", [runs["ray"]])[0]["n"]
        assert traced == len(tasks), "each trial row points at its episode's trace"


def test_an_image_is_built_once_per_node_not_per_trial(ray_cluster, tmp_path):
    token = secrets.token_hex(6)
    ds = slow_task(tmp_path / "ds", f"once-{token}", 1,
                   dockerfile=f"FROM debian:bookworm-slim\nRUN echo {token} > /token\nWORKDIR /app\n")
    # Watch the daemon's image events live: a query afterwards with `since` reads the daemon's ring
    # of the last 256 events, which a busy machine's container and exec events push the tag out of.
    client = docker.from_env()
    stream = client.events(decode=True, filters={"type": "image", "event": "tag"})
    events: list[dict] = []
    watcher = threading.Thread(target=lambda: events.extend(stream), daemon=True)
    watcher.start()
    try:
        r = cli(ray_cluster, "eval", "--benchmark", "terminalbench", "--dataset", str(ds), "--agent", "oracle", "-k", "4",
                "-j", "4", "--db", str(tmp_path / "i.duckdb"), "--json", *on_ray(ray_cluster))
        time.sleep(1)
    finally:
        stream.close()
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [t["score"] for t in out["tasks"]] == [1.0] * 4
    tags = [e for e in events if f"once-{token}" in e.get("Actor", {}).get("Attributes", {}).get("name", "")]
    assert len(tags) == 1, f"the image was tagged {len(tags)} times"
    # The tamper scan's pristine containers of the image are gone too: a Ray worker is killed, not
    # exited, so it removes them after each trial (atexit would never run).
    images = {i.id for i in client.images.list(name=f"metaopt-task/once-{token}")}
    pristine = [c for c in client.api.containers(all=True, filters={"label": "metaopt.pristine=1"})
                if c["ImageID"] in images]
    assert pristine == [], f"{len(pristine)} pristine containers left on the node"
    for img in client.images.list(name=f"metaopt-task/once-{token}"):
        client.images.remove(img.id, force=True)


def test_no_node_can_hold_the_trial_is_an_error_row_not_a_hang(ray_cluster, tmp_path):
    r = cli(ray_cluster, "eval", "--benchmark", "terminalbench-sample", "--agent", "oracle", "--tasks", "hello-greetings",
            "--gpus", "1", "--db", str(tmp_path / "g.duckdb"), "--json", *on_ray(ray_cluster), timeout=120)
    assert r.returncode == 1 and "every one of the 1 trials errored" in r.stderr, r.stderr  # a run with no score
    [t] = json.loads(r.stdout)["tasks"]
    assert t["status"] == "error" and t["score"] is None
    assert "no node of the Ray cluster can hold this trial" in t["error"] and "1 GPU" in t["error"]


def test_bad_executor_options_are_one_line_and_exit_2(ray_cluster, tmp_path):
    for args, words in ((["--executor", "spark"], "--executor: unknown executor 'spark'"),
                        (["--ray-address", ray_cluster.address], "--ray-address: needs --executor ray"),
                        (["--executor", "ray", "--ray-address", "127.0.0.2:1"], "cannot join the Ray cluster")):
        r = cli(ray_cluster, "eval", "--benchmark", "terminalbench-sample", "--agent", "nop", "--tasks", "hello-greetings",
                "--db", str(tmp_path / "b.duckdb"), *args, timeout=180)
        assert r.returncode == 2 and words in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


def test_a_worker_killed_mid_trial_is_retried_and_the_trial_completes(ray_cluster, tmp_path):
    name = f"slow-{secrets.token_hex(4)}"
    ds = slow_task(tmp_path / "ds", name, 12)
    db = tmp_path / "k.duckdb"
    proc = start(ray_cluster, "eval", "--benchmark", "terminalbench", "--dataset", str(ds), "--agent", "oracle",
                 "--db", str(db), "--json", *on_ray(ray_cluster))
    try:
        wait_for(lambda: containers([name]), 180, "the trial's container")
        [victim] = wait_for(lambda: ray_cluster.busy_workers("trial_on_node"), 30, "the worker running the trial")
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
        leftovers = containers([name])
        remove([name])
    assert proc.returncode == 0, stderr
    [t] = json.loads(stdout)["tasks"]
    with Store(db, read_only=True) as s:
        [row] = s.rows("SELECT infra_errors, hardware, error FROM trials")
    assert (t["status"], t["score"]) == ("passed", 1.0), row
    [failure] = json.loads(row["infra_errors"])
    assert "WorkerCrashedError" in failure["error"] and failure["ray_node_id"]
    assert leftovers == [], "the killed attempt's container is gone"


def test_cleanup_of_a_failed_dispatch_leaves_the_retry_on_the_same_daemon_alone(make_sandbox, test_run_id):
    """Two nodes of one machine share its Docker daemon, and a retry may land on the node that
    failed: the driver's cleanup of the dead dispatch must not remove the retry's container,
    though both carry the trial's task id and attempt."""
    trial = {"metaopt.task_id": f"t-{secrets.token_hex(4)}", "metaopt.attempt": "0"}
    dead = make_sandbox(labels={**trial, DISPATCH: "dead"})
    retry = make_sandbox(labels={**trial, DISPATCH: "retry"})
    counts = cleanup_on_node(test_run_id, {DISPATCH: "dead"})
    assert counts["containers"] == 1, counts
    api = docker.from_env().api
    assert not api.containers(all=True, filters={"id": dead.id})
    assert retry.exec("echo alive").stdout.strip() == "alive"


def test_a_node_that_dies_mid_trial_is_left_and_the_trial_completes_on_another(docker_image, ray_start, tmp_path):
    name = f"slow-{secrets.token_hex(4)}"
    ds = slow_task(tmp_path / "ds", name, 12)
    db = tmp_path / "n.duckdb"
    with ray_start(head_cpus=0, env={"METAOPT_NODE_CACHE": str(tmp_path / "cache")}) as c:  # trials go to the nodes
        nodes = [c.add_node(num_cpus=1), c.add_node(num_cpus=1)]
        proc = start(c, "eval", "--benchmark", "terminalbench", "--dataset", str(ds), "--agent", "oracle",
                     "--db", str(db), "--json", *on_ray(c))
        try:
            wait_for(lambda: containers([name]), 180, "the trial's container")
            [victim] = wait_for(lambda: c.busy_workers("trial_on_node"), 30, "the worker running the trial")
            doomed = c.node_of(victim)
            assert doomed in nodes, "the trial runs on a worker node (the head has no CPU)"
            for pid in [p for p, _ in c._ours() if c.node_of(p) is doomed]:  # the whole node at once:
                os.kill(pid, signal.SIGKILL)  # ray start, raylet, its workers and agents
            stdout, stderr = proc.communicate(timeout=300)
        finally:
            proc.kill()
            leftovers = containers([name])
            remove([name])
    assert proc.returncode == 0, stderr
    [t] = json.loads(stdout)["tasks"]
    with Store(db, read_only=True) as s:
        [row] = s.rows("SELECT infra_errors, hardware, error FROM trials")
    assert (t["status"], t["score"]) == ("passed", 1.0), row
    [failure] = json.loads(row["infra_errors"])
    assert failure["ray_node_id"] and failure["ray_node_id"] != json.loads(row["hardware"])["ray_node_id"]
    assert leftovers == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_cancels_the_ray_tasks_and_leaves_no_container(ray_cluster, tmp_path, sig):
    names = [f"hang-{secrets.token_hex(4)}" for _ in range(2)]
    ds = tmp_path / "ds"
    for n in names:
        slow_task(ds, n, 300)
    db = tmp_path / "c.duckdb"
    proc = start(ray_cluster, "eval", "--benchmark", "terminalbench", "--dataset", str(ds), "--agent", "oracle", "-j", "2",
                 "--db", str(db), *on_ray(ray_cluster))
    try:
        wait_for(lambda: len(containers(names)) == 2, 180, "both trials' containers")
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
        leftovers = containers(names)
        remove(names)
    assert proc.returncode == 130, stderr
    assert leftovers == []
    wait_for(lambda: not ray_cluster.busy_workers("trial_on_node"), 30, "the cancelled tasks to end")
    with Store(db, read_only=True) as s:
        assert s.rows("SELECT status FROM runs") == [{"status": "interrupted"}]


def run_args(ds: Path, db: Path, *extra: str) -> list[str]:
    return ["run", "--benchmark", "terminalbench", "--dataset", str(ds), "--harness", "minimal", "--model",
            "fake/solution", "--meta-model", "heuristic", "--trials", "1", "--split", "0.34,0.33,0.33",
            "--max-iterations", "2", "--db", str(db), "--json", *extra]


def test_optimizer_on_ray_survives_a_killed_driver_and_resumes_only_unfinished_trials(ray_cluster, tmp_path):
    ds = make_tasks(tmp_path / "ds", n_long=4, n_short=2)
    db = tmp_path / "r.duckdb"
    proc = start(ray_cluster, *run_args(ds, db, *on_ray(ray_cluster)))
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    try:
        exp = wait_for(lambda: next((w for line in lines for w in line.split() if w.startswith("exp-")), None),
                       120, "the experiment id").rstrip(":")
        # train runs before validation: once a validation container exists, train's trials are in the store
        wait_for(lambda: docker.from_env().api.containers(
            all=True, filters={"label": f"metaopt.run_id={exp}/c0:validation"}), 300, "the validation split")
        proc.send_signal(signal.SIGKILL)  # no cleanup, no end_run: as if the machine died
        proc.wait(30)
    finally:
        proc.kill()
    try:
        check_resume(ray_cluster, db, exp)
    finally:  # what the killed driver left, if the resume did not remove it
        api = docker.from_env().api
        for c in api.containers(all=True, filters={"label": "metaopt.managed=true"}):
            if (c.get("Labels") or {}).get("metaopt.run_id", "").startswith(exp + "/"):
                api.remove_container(c["Id"], force=True)


def check_resume(ray_cluster: RayCluster, db: Path, exp: str) -> None:
    with Store(db, read_only=True) as s:
        before = {r["trial_id"]: r["finished_at"] for r in s.rows("SELECT trial_id, finished_at FROM trials")}
        [cfg] = s.rows("SELECT config FROM experiments WHERE experiment_id = ?", [exp])
    assert before and json.loads(cfg["config"])["run"]["executor"] == "ray"
    r = cli(ray_cluster, "run", "--resume", exp, "--db", str(db), "--json", "--ray-address", ray_cluster.address)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["experiment_id"] == exp and out["best_test_score"] is not None
    with Store(db, read_only=True) as s:
        after = {r["trial_id"]: r["finished_at"] for r in s.rows("SELECT trial_id, finished_at FROM trials")}
        hw = [json.loads(r["hardware"]) for r in s.rows("SELECT hardware FROM trials")]
        run_ids = [r["run_id"] for r in s.rows("SELECT DISTINCT run_id FROM trials")]
    assert {k: after[k] for k in before} == before, "no finished trial ran again"
    assert len(after) > len(before) and all(h.get("ray_node_id") for h in hw)
    left = [c for rid in run_ids for c in docker.from_env().api.containers(
        all=True, filters={"label": f"metaopt.run_id={rid}"})]
    assert left == [], "what the killed driver's trials left was cleaned up by the resumed run"


@pytest.mark.parametrize("executor", ["ray", "local"])
def test_max_trials_stops_dispatching_mid_evaluation(ray_cluster, tmp_path, executor):
    ds = make_tasks(tmp_path / "ds", n_long=4, n_short=2)
    db = tmp_path / "m.duckdb"
    how = on_ray(ray_cluster) if executor == "ray" else ["--executor", "local"]
    r = cli(ray_cluster, *run_args(ds, db, "--max-trials", "3", "-j", "1", *how))
    assert r.returncode == 0, r.stderr
    assert "max trials (3) reached" in json.loads(r.stdout)["stop_reason"]
    with Store(db, read_only=True) as s:
        n = s.rows("SELECT count(*) AS n FROM trials WHERE split != 'test'")[0]["n"]
        booked = s.rows("SELECT count(*) AS n FROM budget_ledger WHERE kind = 'task'")[0]["n"]
        total = s.rows("SELECT count(*) AS n FROM trials")[0]["n"]
    assert n == 3, f"{n} trials before the sealed test split; one at a time, the stop allows exactly 3"
    assert booked == total, "every trial that ran is booked in the ledger"


def test_parallel_candidates_on_ray_run_at_once_and_every_trial_once(ray_cluster, tmp_path):
    """--parallel 2 --executor ray: two candidates' trials overlap in time on the cluster, each
    trial runs once, both candidates are decided."""
    ds = make_tasks(tmp_path / "ds", n_long=2, n_short=2, prefix=f"par-{secrets.token_hex(3)}")
    db = tmp_path / "p.duckdb"
    # no canaries: a smoke run of one task and its canary fills the two-CPU cluster alone, so the
    # second candidate's smoke would wait for the first one's (they could not overlap)
    args = [a if a != "heuristic" else "placebo" for a in run_args(ds, db, "--parallel", "2", "--plateau", "5",
                                                                     "--no-canary", *on_ray(ray_cluster))]
    r = cli(ray_cluster, *args)
    assert r.returncode == 0, r.stderr
    with Store(db, read_only=True) as s:
        cands = s.rows("SELECT candidate_id, status FROM candidates WHERE iteration > 0 ORDER BY iteration")
        spans = s.rows("SELECT candidate_id, min(started_at) AS a, max(finished_at) AS b FROM trials "
                       "WHERE split NOT IN ('test') GROUP BY 1")
        twice = s.rows("SELECT candidate_id, split, task_id, attempt FROM trials GROUP BY ALL HAVING count(*) > 1")
        hw = [json.loads(r["hardware"]) for r in s.rows("SELECT hardware FROM trials")]
    assert len(cands) == 2 and all(c["status"] not in ("pending", "baseline") for c in cands), cands
    c1, c2 = (next(x for x in spans if x["candidate_id"] == c["candidate_id"]) for c in cands)
    assert c1["a"] < c2["b"] and c2["a"] < c1["b"], "the two candidates' trials overlapped in time"
    assert twice == [] and all(h.get("ray_node_id") for h in hw)
