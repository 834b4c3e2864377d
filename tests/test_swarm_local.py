"""`--parallel 3` in process on LocalSandbox: a null experiment (`fake/flaky:0.5` + `placebo`)
with three candidates in flight accepts nothing, stops at exactly --max-trials trials dispatched
over all of them, and every confirmation took the j written at its begin."""

from __future__ import annotations

import pytest
from _local_tasks import step_tasks

from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import plan_experiment, start_experiment
from metaopt.meta_agent.records import Candidate, GateDecision
from metaopt.traces.store import Store


def test_three_in_flight_accept_nothing_on_noise_and_stop_at_exactly_max_trials(tmp_path, local_backend):
    tasks = step_tasks(tmp_path / "tasks", n_long=0, n_short=12)  # one step each: solved iff the coin says so
    cfg = RunConfig(benchmark="local-steps", model="fake/flaky:0.5", meta_model="placebo", trials=1, seed=0,
                    split=(0.34, 0.33, 0.33), max_iterations=200, plateau=200, max_trials=70, parallel=3)
    lines: list[str] = []
    with Store(tmp_path / "s.duckdb") as store:
        exp = start_experiment(plan_experiment(cfg, "baseline", tasks), store=store, backend=local_backend,
                               tracing=None, on_event=lines.append)
        out = exp.run()
        cands = store.select(Candidate, "experiment_id = ?", [exp.id], order="iteration")
        rows = store.select(GateDecision, "experiment_id = ?", [exp.id])
        n = store.rows("SELECT count(*) AS n FROM trials WHERE experiment_id = ? AND split != 'test'", [exp.id])[0]["n"]
        dup = store.rows("SELECT count(*) AS n FROM trials WHERE experiment_id = ? GROUP BY candidate_id, split, "
                         "task_id, attempt HAVING count(*) > 1", [exp.id])
    assert out.stop_reason == "max trials (70) reached" and n == 70 and dup == []  # over all candidates, no overshoot
    assert out.accepted == 0 and all(c.status not in ("pending", "accepted") for c in cands[1:])
    assert len({c.harness_hash for c in cands}) == len(cands)  # no two proposals in flight made the same change
    begun = {r.candidate_id: r.details["j"] for r in rows if r.outcome == "begin"}
    looks = [r for r in rows if r.stage == "confirm" and r.outcome != "begin"]
    assert all(begun[r.candidate_id] == r.details["j"] for r in looks)
    assert sorted(begun.values()) == list(range(1, len(begun) + 1))
    assert sum(r.alpha_spent for r in rows) == pytest.approx(out.alpha_committed) and out.alpha_committed <= 0.05
