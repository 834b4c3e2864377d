"""Issue 41, done-when: a harness keyed on every task's text that reaches the optimizer through a
scripted meta-model is never accepted; it is refused at the guard, before any trial, and the
proposer's history says only that it was task specific (no evasion oracle)."""

from __future__ import annotations

import pytest
import yaml
from _local_tasks import step_tasks

from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import plan_experiment, start_experiment
from metaopt.meta_agent.proposers import history
from metaopt.meta_agent.proposers.llm_tools import harness_yaml
from metaopt.meta_agent.records import Candidate, GateDecision
from metaopt.task_agent.harness_io import load_harness, resolve_harness
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing


@pytest.fixture(scope="module")
def backend(local_backend):
    return local_backend


def test_a_harness_keyed_on_every_task_is_refused_at_the_guard(tmp_path, backend):
    tasks = step_tasks(tmp_path / "tasks", n_long=3, n_short=3)
    data = yaml.safe_load(harness_yaml(load_harness(resolve_harness("minimal"))))
    table = {t.id.replace("-", "_"): "; ".join(t.solution.steps[:2]) for t in tasks}  # ids as keys
    data["tools"][0]["parameters"]["x-known"] = table
    data["prompts"]["system"] += "\nKnown jobs: " + ", ".join(f"{t.id.upper().replace('-', ' ')}" for t in tasks)
    meta = tmp_path / "meta.yaml"
    meta.write_text(yaml.safe_dump([{"tool": "write_revision", "arguments": {
        "harness_yaml": yaml.safe_dump(data, sort_keys=False), "rationale": "remember what worked",
        "cause": "the agent re-derives known answers", "fixes": [], "keeps": [], "cites": []}}], sort_keys=False))
    cfg = RunConfig(benchmark="local-steps", model="fake/solution", meta_model=f"fake/script:{meta}", trials=1,
                    split=(0.34, 0.33, 0.33), max_iterations=1, concurrency=2, canary=False)
    with Store(tmp_path / "s.duckdb") as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(cfg, "minimal", tasks), store=store, backend=backend, tracing=tracing)
        out = exp.run()
        tracing.shutdown()
        cands = store.select(Candidate, "experiment_id = ?", [exp.id], order="iteration")
        decisions = store.select(GateDecision, "experiment_id = ?", [exp.id])
        records = history.load(store, exp.id)
        child = [c for c in cands if c.parent_id]
        trials = store.rows("SELECT count(*) AS n FROM trials WHERE candidate_id = ?", [child[0].candidate_id])
    assert out.accepted == 0 and len(child) == 1 and child[0].status == "invalid"
    [d] = [d for d in decisions if d.candidate_id == child[0].candidate_id]
    assert d.stage == "guard" and "task-specific content" in d.reason and "task id" in d.reason  # the store: all of it
    assert trials[0]["n"] == 0  # refused before any budget was spent
    [rec] = [r for r in records if r.candidate_id == child[0].candidate_id]
    assert "task-specific content" in (rec.status_reason or "") and "task id" not in rec.status_reason
    assert all("task id" not in g.reason for g in rec.gate)


def test_the_audit_reads_an_accepted_candidates_trials(tmp_path, backend):
    """The cross-trace audit over a real experiment: the heuristic's honest turn-limit fix is
    accepted; its trials type no expected value before reading it, and its gain is spread."""
    from metaopt.meta_agent.guard.audit import audit

    tasks = step_tasks(tmp_path / "tasks")
    cfg = RunConfig(benchmark="local-steps", model="fake/solution", meta_model="heuristic", trials=1,
                    split=(0.34, 0.33, 0.33), max_iterations=2, concurrency=2, canary=False)
    with Store(tmp_path / "s.duckdb") as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(cfg, "minimal", tasks), store=store, backend=backend, tracing=tracing)
        out = exp.run()
        tracing.shutdown()
        flags = audit(store, exp.id, tasks)
        from metaopt.explorer.report import render
        page = render(store, exp.id)
    assert out.accepted >= 1
    assert [f for f in flags if f.kind == "value before observation"] == []
    assert out.audit is not None and [f["kind"] for f in out.audit] == [f.kind for f in flags]  # stored with the result
    assert "<h2>Cross-trace audit</h2>" in page


def test_run_with_a_reviewer_consults_it_before_any_trial(tmp_path, backend):
    """`metaopt run --reviewer M` (RunConfig.reviewer): a revision that adds a sentence passes the
    mechanical checks, then a reviewer that cannot give a cited verdict refuses it, before trials."""
    import json

    tasks = step_tasks(tmp_path / "tasks")
    data = yaml.safe_load(harness_yaml(load_harness(resolve_harness("minimal"))))
    data["prompts"]["system"] += "\nCheck each step's output before the next one."
    meta = tmp_path / "meta.yaml"
    meta.write_text(yaml.safe_dump([{"tool": "write_revision", "arguments": {
        "harness_yaml": yaml.safe_dump(data, sort_keys=False), "rationale": "check outputs",
        "cause": "steps ran blind", "fixes": [], "keeps": [], "cites": []}}], sort_keys=False))
    script = tmp_path / "reviewer.yaml"
    script.write_text(json.dumps([{"text": "I am not sure."}]))
    cfg = RunConfig(benchmark="local-steps", model="fake/solution", meta_model=f"fake/script:{meta}", trials=1,
                    split=(0.34, 0.33, 0.33), max_iterations=1, concurrency=2, canary=False,
                    reviewer=f"fake/script:{script}")
    with Store(tmp_path / "s.duckdb") as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(cfg, "minimal", tasks), store=store, backend=backend, tracing=tracing)
        out = exp.run()
        tracing.shutdown()
        child = [c for c in store.select(Candidate, "experiment_id = ?", [exp.id]) if c.parent_id]
        decisions = store.select(GateDecision, "experiment_id = ?", [exp.id])
        trials = store.rows("SELECT count(*) AS n FROM trials WHERE candidate_id = ?", [child[0].candidate_id])
    assert out.accepted == 0 and child[0].status == "invalid"
    [d] = [d for d in decisions if d.candidate_id == child[0].candidate_id]
    assert d.stage == "guard" and "reviewer" in d.reason and "could not judge" in d.reason
    assert trials[0]["n"] == 0
