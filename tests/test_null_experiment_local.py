"""A null experiment end to end, in process on LocalSandbox: `fake/flaky:0.5` passes each trial by
a coin seeded by its trial id, whatever the harness, and `placebo` proposes changes that cannot
matter, so every acceptance would be a false discovery. The staged gate accepts none, in repeated
seeded runs, and every gate row states the rule and the alpha it committed."""

from __future__ import annotations

import pytest
from _local_tasks import step_tasks

from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import plan_experiment, start_experiment
from metaopt.meta_agent.records import Candidate, GateDecision, Spend
from metaopt.traces.store import Store


@pytest.fixture(scope="module")
def backend(local_backend):
    return local_backend


@pytest.mark.parametrize("seed", [0, 1])
def test_flaky_model_and_placebo_proposer_accept_nothing(tmp_path, backend, seed):
    tasks = step_tasks(tmp_path / "tasks", n_long=0, n_short=12)  # one step each: solved iff the coin says so
    cfg = RunConfig(benchmark="local-steps", model="fake/flaky:0.5", meta_model="placebo", trials=2, seed=seed,
                    split=(0.34, 0.33, 0.33), max_iterations=10, plateau=10, concurrency=2)
    with Store(tmp_path / "s.duckdb") as store:
        exp = start_experiment(plan_experiment(cfg, "baseline", tasks), store=store, backend=backend, tracing=None,
                               experiment_id=f"exp-null-{seed}")
        out = exp.run()
        cands = store.select(Candidate, "experiment_id = ?", [exp.id], order="iteration")
        rows = store.select(GateDecision, "experiment_id = ?", [exp.id])
        saved = store.select(Spend, "experiment_id = ? AND kind = 'saved'", [exp.id])
        passed = store.rows("SELECT avg(score) AS p FROM trials WHERE experiment_id = ?", [exp.id])[0]["p"]
    assert out.iterations == 10 and out.stop_reason == "max iterations (10) reached", out.stop_reason
    assert out.accepted == 0 and out.best_candidate == cands[0].candidate_id
    assert all("placebo: appended neutral sentence" in c.rationale for c in cands[1:])
    assert 0.35 < passed < 0.65  # the noise is real: about half the trials pass
    # The selection did its job on most proposals; the rows say what rule ran and what alpha went.
    assert {r.stage for r in rows} >= {"screen", "select"}
    assert all(r.rule.startswith("Staged gate, experiment-wise alpha = 0.05") for r in rows)
    assert all(r.alpha_spent is not None for r in rows)
    assert sum(r.alpha_spent for r in rows) == pytest.approx(out.alpha_committed) and out.alpha_committed <= 0.05
    assert all((r.alpha_spent > 0) == (r.stage == "confirm" and r.details["look"] == 1) for r in rows)
    assert saved and all(s.trials > 0 for s in saved) and out.validation_trials_saved == sum(s.trials for s in saved)
    assert out.best_validation_gain is None
