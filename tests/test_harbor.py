"""metaopt in the Harbor ecosystem, against the real `harbor` CLI (0.25.0) offline.

One Harbor job (module scope) runs the baseline harness exported with `--format harbor` on five
sample Harbor tasks, 2 attempts each, with the metaopt job plugin attached; the model is a local
OpenAI-wire stand-in that solves three tasks (it sends the task's own solve.sh) and gives up on
two. `metaopt eval` runs the same harness and stand-in on the same tasks. Then: the scores agree
task by task, the trajectories are ATIF, the job imports (idempotently) with its failures grouped,
the plugin filled a store during the run, and `metaopt run --baseline-from` starts from the job.
Skipped where scripts/setup.sh has not installed Harbor's virtualenv (tests/harbor_support.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import harbor_support as hs
import pytest
from wire_servers import RoutedOpenAI, openai_completion, openai_tool_call

from metaopt.evaluation.harbor_jobs import import_job
from metaopt.explorer import queries as explorer
from metaopt.export import export
from metaopt.traces import queries
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

pytestmark = pytest.mark.skipif(not hs.available(), reason="Harbor's virtualenv is not installed (scripts/setup.sh)")

REPO = Path(__file__).resolve().parents[1]
TASKS = ["archive-repack", "json-inventory-report", "rename-api-sed", "rotate-backups-script", "secure-permissions"]
SOLVED = {"archive-repack", "json-inventory-report", "secure-permissions"}
AGENT = "baseline_agent.harbor_agent:HarnessHarborAgent"


def _route(body: dict) -> dict:
    """Turn 1: the task's solve.sh through bash (for SOLVED tasks); then finish, every turn."""
    task = next(m["content"] for m in body["messages"] if m["role"] == "user")
    turns = sum(m["role"] == "assistant" for m in body["messages"])
    solve = next(((hs.SAMPLES / n / "solution" / "solve.sh").read_text() for n in SOLVED
                 if (hs.SAMPLES / n / "instruction.md").read_text().strip() in task), None) if turns == 0 else None
    if solve is not None:
        call = openai_tool_call("call-solve", "bash", json.dumps({"command": solve}))
    else:
        call = openai_tool_call(f"call-finish-{turns}", "finish", json.dumps({"summary": "done"}))
    return openai_completion(tool_calls=[call], finish_reason="tool_calls", model="stand-in")


def _metaopt(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metaopt.cli", *args], capture_output=True, text=True, check=False,
                          timeout=timeout, env=hs.env(PYTHONPATH=str(REPO), OPENAI_API_KEY="sk-test",
                                                    METAOPT_ALLOW_MODEL_REQUESTS="1"))  # the local stand-in only


@pytest.fixture(scope="module")
def job(tmp_path_factory, docker_image):
    root = tmp_path_factory.mktemp("harbor")
    tasks = hs.offline_copy(TASKS, root / "tasks")
    export("baseline", "harbor", root / "export", db=root / "none.duckdb")
    with RoutedOpenAI(_route) as server:
        job_dir = hs.harbor_run(tasks, root / "jobs", "exported", "--agent", AGENT, "-m", "openai-compatible/stand-in",
                                "-k", "2", "--plugin", "metaopt", "--pk", f"db={root / 'plugin.duckdb'}",
                                extra_env={"PYTHONPATH": f"{root / 'export'}:{REPO}", "OPENAI_API_KEY": "sk-test",
                                           "OPENAI_BASE_URL": server.openai_url, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        ev = _metaopt("eval", "-b", "terminalbench", "--dataset", str(tasks), "--harness", "baseline", "-m",
                      "openai-compatible/stand-in", "--base-url", server.openai_url, "-k", "1", "-j", "3",
                      "--db", str(root / "eval.duckdb"), "--json")
    assert ev.returncode == 0, ev.stderr[-3000:]
    yield SimpleNamespace(root=root, tasks=tasks, dir=job_dir, eval=json.loads(ev.stdout))


def _harbor_scores(job_dir: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in job_dir.glob("*/result.json"):
        data = json.loads(r.read_text())
        rewards = data["verifier_result"]["rewards"]  # reward.txt, or reward.json's keys (scored by their mean)
        out.setdefault(data["task_name"], []).append(rewards.get("reward", sum(rewards.values()) / len(rewards)))
    return out


def _calls(task: str) -> int:
    """Model calls per episode: solve.sh (solved tasks only), finish, finish again after the
    baseline harness's verification round."""
    return 3 if task in SOLVED else 2


def test_exported_agent_under_harbor_scores_as_metaopt_eval(job):
    harbor = _harbor_scores(job.dir)
    with Store(job.root / "eval.duckdb", read_only=True) as store:
        ours = {r["task_id"]: r["score"] for r in store.rows("SELECT task_id, score FROM trials")}
    assert sorted(harbor) == sorted(ours) == TASKS
    for task in TASKS:
        assert harbor[task] == [ours[task]] * 2, task
        assert ours[task] == (1.0 if task in SOLVED else 0.0), task


def test_exported_agent_writes_atif_and_reports_tokens(job):
    trajectories = sorted(job.dir.glob("*/agent/trajectory.json"))
    assert len(trajectories) == 10
    check = ("import sys\nfrom harbor.models.trajectories import Trajectory\n"
             "for p in sys.argv[1:]:\n    t = Trajectory.model_validate_json(open(p).read())\n"
             "    assert t.steps[-1].tool_calls[0].function_name == 'finish', p\n")
    p = subprocess.run([str(hs.VENV / "bin" / "python"), "-c", check, *map(str, trajectories)], capture_output=True,
                       text=True, check=False)
    assert p.returncode == 0, p.stderr
    for r in job.dir.glob("*/result.json"):
        ctx = json.loads(r.read_text())["agent_result"]
        calls = _calls(r.parent.name.split("__")[0])
        assert (ctx["n_input_tokens"], ctx["n_output_tokens"]) == (100 * calls, 50 * calls)


def test_import_harbor_job_is_idempotent_and_grouped(job, tmp_path):
    db = tmp_path / "m.duckdb"
    first = _metaopt("import", "harbor", str(job.dir), "--db", str(db), "--json")
    again = _metaopt("import", "harbor", str(job.dir), "--db", str(db), "--json")
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert (json.loads(first.stdout)["imported"], json.loads(again.stdout)["imported"]) == (10, 0)
    with Store(db, read_only=True) as store:
        rows = store.rows("SELECT task_id, attempt, score, status, trace_id FROM trials ORDER BY task_id, attempt")
        assert [(r["task_id"], r["attempt"]) for r in rows] == [(t, a) for t in TASKS for a in (0, 1)]
        assert all(r["trace_id"] for r in rows)
        spans = sum(1 + 2 * _calls(r["task_id"]) for r in rows)  # invoke_agent, then a chat and a tool per call
        assert store.rows("SELECT count(*) AS n FROM spans")[0]["n"] == spans
        groups = queries.failures(store, "harbor-exported")
        assert [(g["failure_mode"], g["count"]) for g in groups] == [("tests_failed", 4)]
        runs = explorer.overview(store)["runs"]
        assert [(r["run_id"], r["trials"], r["not_passed"]) for r in runs] == [("harbor-exported", 10, 4)]
        shown = queries.show_trial(store, "harbor-exported/rename-api-sed/0")
        assert "finish" in json.dumps(shown, default=str)


def test_plugin_wrote_every_trial_during_the_run(job):
    db = job.root / "plugin.duckdb"
    with Store(db, read_only=True) as store:
        rows = store.rows("SELECT task_id, score FROM trials WHERE run_id = 'harbor-exported'")
        assert sorted(r["task_id"] for r in rows) == sorted(TASKS * 2)
        assert {r["task_id"]: r["score"] for r in rows} == {t: 1.0 if t in SOLVED else 0.0 for t in TASKS}
    with Store(db) as store:  # the same trials as an import: importing the job now adds nothing
        tracing = Tracing.for_store(store)
        assert import_job(store, job.dir, tracing=tracing).imported == []
        tracing.shutdown()


def test_run_baseline_from_starts_from_the_job(job, tmp_path):
    db = tmp_path / "run.duckdb"
    p = _metaopt("run", "-b", "terminalbench", "--dataset", str(job.tasks), "-m", "fake/nop", "--meta-model",
                 "heuristic", "--split", "0.6,0.2,0.2", "-k", "1", "--max-trials", "1", "--no-canary",
                 "--baseline-from", str(job.dir), "--db", str(db), "--json")
    assert p.returncode == 0 and "baseline evidence: 3 train trials" in p.stderr, p.stderr[-3000:]
    with Store(db, read_only=True) as store:
        train = store.rows("SELECT trial_id, agent, trace_id FROM trials WHERE split = 'train'")
    assert len(train) == 3 and all(r["agent"].startswith("metaopt-baseline@") and r["trace_id"] for r in train)
