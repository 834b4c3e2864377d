"""Multi-container tasks (a compose file with services besides the agent's), on real Docker.

One module fixture runs the two-service task tests/data/compose_tasks/kv-ledger (the agent's
`main` plus an HTTP key-value service `kv` built from the local base image; its tests query
`kv` over the task's network) four ways at once: `metaopt eval` with the oracle and with nop,
and, where scripts/setup.sh installed it, the real `harbor run` (0.25.0, Compose v2) with its
oracle and nop. Both must score 1.0 and 0.0. Then: a trial's services left running as a `kill -9`
would leave them are found by the label-based reaping (`prune(run_id)`, what `--resume` calls),
and a SIGTERM mid-trial leaves no container or network of the run.
"""

from __future__ import annotations

import json
import secrets
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import harbor_support as hs
import pytest
from _docker_fixtures import metaopt

from metaopt.benchmarks.datasets import load_task
from metaopt.sandbox.base import SandboxSpec
from metaopt.sandbox.docker_services import ServiceSpec
from metaopt.traces.store import Store

TASKS = Path(__file__).parent / "data" / "compose_tasks"
TASK = "kv-ledger"


@pytest.fixture(scope="module")
def runs(tmp_path_factory, docker_image):
    root = tmp_path_factory.mktemp("compose")

    def ours(agent: str) -> dict:
        p = metaopt("eval", "-b", "terminalbench", "--dataset", str(TASKS), "--agent", agent,
                    "--db", str(root / f"{agent}.duckdb"), "--json", timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout)

    def harbor(agent: str) -> dict[str, float]:
        job = hs.harbor_run(root / "harbor-tasks", root / "jobs", agent, "-a", agent, timeout=300)
        return {json.loads(r.read_text())["task_name"]: json.loads(r.read_text())["verifier_result"]["rewards"]["reward"]
                for r in job.glob("*/result.json")}

    work = [(ours, "oracle"), (ours, "nop")]
    if hs.available():
        hs.offline_copy([TASK], root / "harbor-tasks", src=TASKS)
        work += [(harbor, "oracle"), (harbor, "nop")]
    with ThreadPoolExecutor(len(work)) as pool:
        done = [pool.submit(fn, agent) for fn, agent in work]
        results = [f.result() for f in done]
    return SimpleNamespace(ours=dict(zip(("oracle", "nop"), results[:2], strict=True)),
                           harbor=dict(zip(("oracle", "nop"), results[2:], strict=True)) if hs.available() else None)


def test_metaopt_eval_runs_the_services_oracle_one_nop_zero(runs):
    oracle, nop = runs.ours["oracle"], runs.ours["nop"]
    assert [(t["task_id"], t["score"], t["status"]) for t in oracle["tasks"]] == [(TASK, 1.0, "passed")], oracle
    assert [(t["task_id"], t["score"], t["status"]) for t in nop["tasks"]] == [(TASK, 0.0, "failed")], nop


def test_harbor_scores_the_task_as_metaopt_does(runs):
    if runs.harbor is None:
        pytest.skip("Harbor's virtualenv is not installed (scripts/setup.sh)")
    assert runs.harbor == {"oracle": {TASK: 1.0}, "nop": {TASK: 0.0}}


def test_a_killed_trials_services_and_network_are_reaped_by_run_id(docker_backend, docker_image):
    run_id = f"test-compose-{secrets.token_hex(4)}"
    task = load_task(TASKS / TASK, "test")
    labels = {"metaopt.task_id": TASK, "metaopt.attempt": "0"}
    svc = ServiceSpec(name="kv", image=docker_image, command=["sleep", "infinity"], init=True)
    group = docker_backend.start_services([svc], run_id=run_id, labels=labels, internet=task.network)
    sb = docker_backend.start(SandboxSpec(image=docker_image, network_name=group.network, aliases=("main",),
                                          labels=labels), run_id=run_id)
    try:
        api = docker_backend.api
        assert sb.exec("getent hosts kv").ok  # the service answers to its name on the trial's network
        [net] = api.networks(names=[group.network])
        assert net["Internal"] and net["Labels"]["metaopt.run_id"] == run_id
        kv = api.inspect_container(group.containers["kv"])["Config"]["Labels"]
        assert (kv["metaopt.managed"], kv["metaopt.run_id"], kv["metaopt.service"]) == ("true", run_id, "kv")
        # what a kill -9 leaves behind: nothing closed; the reaping finds everything by its labels
        assert docker_backend.prune(run_id) == {"containers": 2, "networks": 1, "volumes": 0, "images": 0}
        assert not api.networks(names=[group.network])
        assert not api.containers(all=True, filters={"label": f"metaopt.run_id={run_id}"})
    finally:
        sb.close()
        group.close()


def test_sigterm_mid_trial_leaves_no_service_or_network(tmp_path, docker_backend, docker_image):
    name = f"kv-sigterm-{secrets.token_hex(3)}"
    shutil.copytree(TASKS / TASK, tmp_path / "ds" / name)
    (tmp_path / "ds" / name / "solution" / "solve.sh").write_text("sleep 600\n")
    db = tmp_path / "t.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "metaopt.cli", "eval", "-b", "terminalbench", "--dataset",
                             str(tmp_path / "ds"), "--agent", "oracle", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    api, deadline = docker_backend.api, time.monotonic() + 120
    while len(api.containers(filters={"label": f"metaopt.task_id={name}"})) < 2:  # the service and the agent's
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"the trial never started: {proc.communicate()[1][-2000:]}")
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    with Store(db, read_only=True) as store:
        [run] = store.rows("SELECT run_id, status FROM runs")
    assert run["status"] == "interrupted"
    run_label = f"metaopt.run_id={run['run_id']}"
    assert api.containers(all=True, filters={"label": run_label}) == []
    assert api.networks(filters={"label": run_label}) == []
    for image in api.images(name=f"metaopt-task/{name}*"):  # this copy's tags (the layers are kv-ledger's)
        for tag in image.get("RepoTags") or []:
            if tag.startswith(f"metaopt-task/{name}"):
                api.remove_image(tag)
