"""Harbor job folders into the store, without Harbor: two real jobs that `harbor run` 0.25.0
wrote here (tests/data/harbor_jobs: `exp1`, the baseline harness exported with --format harbor on
two sample tasks, with ATIF trajectories; `nop9`, Harbor's nop agent on the nine sample Harbor
tasks), kept without their lock files, logs and artifacts. The job plugin is driven with
stand-ins for Harbor's Job and hook event, shaped as harbor.job / harbor.trial.hooks define them.
tests/test_harbor.py runs the same paths against the real CLI."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from metaopt.core.errors import HarborJobError
from metaopt.evaluation.harbor_jobs import import_job
from metaopt.evaluation.harbor_plugin import MetaoptPlugin
from metaopt.traces import queries
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

JOBS = Path(__file__).parent / "data" / "harbor_jobs"


def _import(db: Path, job: str) -> list[str]:
    with Store(db) as store:
        tracing = Tracing.for_store(store)
        try:
            return import_job(store, JOBS / job, tracing=tracing).imported
        finally:
            tracing.shutdown()


def test_import_is_idempotent_and_reads_scores_failures_and_trajectories(tmp_path):
    db = tmp_path / "m.duckdb"
    assert len(_import(db, "exp1")) == 2 and len(_import(db, "nop9")) == 9
    assert _import(db, "exp1") == [] and _import(db, "nop9") == []
    with Store(db, read_only=True) as store:
        exp = store.rows("SELECT task_id, attempt, score, status, agent, input_tokens, trace_id FROM trials "
                         "WHERE run_id = 'harbor-exp1' ORDER BY task_id")
        assert [(r["task_id"], r["attempt"], r["score"], r["status"]) for r in exp] == [
            ("rename-api-sed", 0, 1.0, "passed"), ("secure-permissions", 0, 1.0, "passed")]
        assert {r["agent"] for r in exp} == {"metaopt-baseline@openai-compatible/fake"}
        assert [r["input_tokens"] for r in exp] == [300, 300]
        spans = store.rows("SELECT trial_id, name FROM spans ORDER BY start_ns")
        assert len(spans) == 14 and {s["trial_id"] for s in spans} == {f"harbor-exp1/{r['task_id']}/0" for r in exp}
        shown = json.dumps(queries.show_trial(store, "harbor-exp1/secure-permissions/0"), default=str)
        assert "/app/deploy/secrets" in shown and "finish" in shown  # the instruction and the tool calls
        nop = store.rows("SELECT score, status, tests, trace_id FROM trials WHERE run_id = 'harbor-nop9'")
        assert {(r["score"], r["status"]) for r in nop} == {(0.0, "failed")} and not any(r["trace_id"] for r in nop)
        assert all("failed" in json.loads(r["tests"]).values() for r in nop)
        assert [(g["failure_mode"], g["count"]) for g in queries.failures(store, "harbor-nop9")] == [("tests_failed", 9)]


def test_a_folder_that_is_no_job_is_one_line_exit_2(tmp_path):
    with Store(tmp_path / "m.duckdb") as store, pytest.raises(HarborJobError, match="config.json: missing"):
        import_job(store, tmp_path)
    p = subprocess.run([sys.executable, "-m", "metaopt.cli", "import", "harbor", str(tmp_path), "--db",
                        str(tmp_path / "m.duckdb")], capture_output=True, text=True, check=False)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_plugin_writes_each_trial_as_it_ends(tmp_path):
    """on_job_start hooks trial END; each event writes its trial; an import afterwards adds nothing."""
    job_dir = tmp_path / "exp1"
    shutil.copytree(JOBS / "exp1", job_dir)
    hooks = []
    job = SimpleNamespace(config=SimpleNamespace(job_name="exp1"), job_dir=job_dir, on_trial_ended=hooks.append)
    plugin = MetaoptPlugin(db=str(tmp_path / "p.duckdb"))
    trials = sorted(p.parent for p in job_dir.glob("*/result.json"))

    async def run() -> None:
        await plugin.on_job_start(job)
        for trial in trials:
            data = json.loads((trial / "result.json").read_text())
            event = SimpleNamespace(config=SimpleNamespace(trials_dir=str(job_dir), trial_name=trial.name),
                                    result=SimpleNamespace(model_dump=lambda mode, d=data: d))
            await hooks[0](event)
            with Store(tmp_path / "p.duckdb", read_only=True) as store:  # on disk as soon as the trial ends
                assert store.rows("SELECT count(*) AS n FROM trials")[0]["n"] == len(plugin.written)
        await plugin.on_job_end(None)

    asyncio.run(run())
    assert len(hooks) == 1 and len(plugin.written) == 2
    assert _import(tmp_path / "p.duckdb", "exp1") == []
    with Store(tmp_path / "p.duckdb", read_only=True) as store:
        assert store.rows("SELECT status FROM runs WHERE run_id = 'harbor-exp1'") == [{"status": "finished"}]
        assert store.rows("SELECT count(*) AS n FROM spans")[0]["n"] == 14
