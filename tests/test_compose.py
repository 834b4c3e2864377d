"""Multi-container tasks (a compose file with services besides the agent's), on real Docker.

One module fixture runs the two-service task tests/data/compose_tasks/kv-ledger (the agent's
`main` plus an HTTP key-value service `kv` built from the local base image; its tests query
`kv` over the task's network) four ways at once: `metaopt eval` with the oracle and with nop,
and, where scripts/setup.sh installed it, the real `harbor run` (0.25.0, Compose v2) with its
oracle and nop. Both must score 1.0 and 0.0. A second test leaves a trial's services running as a
`kill -9` would and checks that the label-based reaping (`prune(run_id)`, what `--resume` and
Ctrl-C cleanup call) removes their containers and network.
"""

from __future__ import annotations

import json
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import harbor_support as hs
import pytest
from _docker_fixtures import metaopt

from metaopt.benchmarks.formats import load_task
from metaopt.sandbox.base import SandboxSpec
from metaopt.sandbox.docker_services import ServiceSpec

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
