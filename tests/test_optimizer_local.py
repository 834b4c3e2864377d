"""The optimizer in process, on LocalSandbox: the whole loop (baseline, proposal, guard, smoke,
screen, gate, sealed test) with real sandboxes, a real store and real traces, in seconds."""

from __future__ import annotations

import pytest
from _local_tasks import step_tasks

from metaopt.explorer import queries as explorer
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import find_experiment, plan_experiment, resume_experiment, start_experiment
from metaopt.meta_agent.records import Candidate, GateDecision
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing


@pytest.fixture(scope="module")
def backend(local_backend):
    return local_backend


def config(**kw) -> RunConfig:
    base = {"benchmark": "local-steps", "model": "fake/solution", "meta_model": "heuristic", "trials": 1,
            "split": (0.34, 0.33, 0.33), "max_iterations": 2, "concurrency": 2}
    return RunConfig(**{**base, **kw})


def test_heuristic_run_on_local_sandboxes_improves_and_explains_itself(tmp_path, backend):
    tasks = step_tasks(tmp_path / "tasks")
    with Store(tmp_path / "s.duckdb") as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(config(), "minimal", tasks), store=store, backend=backend,
                               tracing=tracing)
        out = exp.run()
        tracing.shutdown()
        cands = store.select(Candidate, "experiment_id = ?", [exp.id], order="iteration")
        decisions = store.select(GateDecision, "experiment_id = ?", [exp.id])
        view = explorer.experiment(store, exp.id)
    assert out.accepted >= 1 and out.best_test_score > out.baseline_test_score, out
    gain = out.best_validation_gain  # beside the sealed test score: the validation gain, selection taken into account
    assert gain["confirmation_gain"] > 0 and gain["adjusted_ci"][0] <= gain["adjusted_gain"] <= gain["adjusted_ci"][1]
    shown = [d for c in view["candidates"] for d in c["decisions"] if d["estimate"]]
    assert shown and shown[-1]["estimate"]["adjusted_gain"] == pytest.approx(gain["adjusted_gain"])
    assert view["experiment"]["result"]["best_validation_gain"] == gain
    kept = [c for c in cands if c.status == "accepted"]
    assert "turn limit" in kept[0].rationale and "max_turns" in kept[0].diff
    stages = [d.stage for d in decisions if d.candidate_id == kept[0].candidate_id]
    assert stages[0] == "screen" and "select" in stages and stages[-2:] == ["confirm", "verdict"], stages
    assert [d.outcome for d in decisions if d.candidate_id == kept[0].candidate_id][-1] == "accept"
    assert 0 < sum(d.alpha_spent for d in decisions) <= 0.05


def test_an_interrupted_experiment_resumes_and_reruns_nothing(tmp_path, backend):
    tasks = step_tasks(tmp_path / "tasks")
    db = tmp_path / "s.duckdb"
    seen: list[str] = []

    def stop_after(n: int):
        def on_trial(r):
            seen.append(r.trial_id)
            if len(seen) == n:
                raise KeyboardInterrupt
        return on_trial

    with Store(db) as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(config(), "minimal", tasks), store=store, backend=backend,
                               tracing=tracing, on_trial=stop_after(8))
        with pytest.raises(KeyboardInterrupt):
            exp.run()
        tracing.shutdown()
    record = find_experiment(db, exp.id)
    assert record.status == "interrupted"
    first = list(seen)
    with Store(db) as store:
        tracing = Tracing.for_store(store)
        out = resume_experiment(record, store=store, tasks=tasks, backend=backend, tracing=tracing,
                                on_trial=lambda r: seen.append(r.trial_id)).run()
        tracing.shutdown()
        n_trials = store.rows("SELECT count(*) AS n FROM trials WHERE experiment_id = ?", [exp.id])[0]["n"]
    again = seen[len(first):]
    assert not set(again) & set(first), "a finished trial ran again"
    assert n_trials == len(set(seen)) and out.accepted >= 1
    assert find_experiment(db, exp.id).status == "finished"


def test_resume_first_removes_the_sandboxes_a_killed_run_left(tmp_path, backend):
    from metaopt.sandbox.base import SandboxSpec

    tasks = step_tasks(tmp_path / "tasks")
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        exp = start_experiment(plan_experiment(config(max_iterations=1), "minimal", tasks), store=store,
                               backend=backend, tracing=None)
        run_id = f"{exp.id}/c0:train"  # what a `kill -9` mid-run leaves: a run still 'running', its sandbox alive
        store.begin_run(run_id, benchmark="local-steps", agent="x", dataset=None, args={})
        left = backend.start(SandboxSpec(image="host"), run_id=run_id)
        store.begin_run("run-other", benchmark="local-steps", agent="x", dataset=None, args={})
        other = backend.start(SandboxSpec(image="host"), run_id="run-other")  # not this experiment's
        exp.ledger.finish("interrupted")
    record = find_experiment(db, exp.id)
    with Store(db) as store:
        resume_experiment(record, store=store, tasks=tasks, backend=backend, tracing=None)
    assert left.closed and not left.root.exists()
    assert not other.closed
    other.close()
