"""`metaopt run --seed S` is repeatable: the split, every candidate's selection order and
permutation seeds come from the seed and the candidate's position, never from the experiment id
(which carries the start time), so two runs with one seed write the same ledger row for row."""

from __future__ import annotations

import pytest
from _local_tasks import CHECK, step_tasks

from metaopt.benchmarks.task import Verifier
from metaopt.evaluation import TrialResult
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.error_control import AlphaSpending
from metaopt.meta_agent.experiment import plan_experiment, start_experiment
from metaopt.meta_agent.gate import NoiseFloor
from metaopt.meta_agent.records import Candidate, ExperimentRecord, GateDecision, Spend
from metaopt.meta_agent.sequential import SequentialRule, validate
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

SKIP = {"created_at", "decided_at", "recorded_at", "started_at", "finished_at",  # timestamps
        "evidence", "proposal_trace_id"}  # span and trace ids: random per run, not decisions


@pytest.fixture(scope="module")
def backend(local_backend):
    return local_backend


def mixed_tasks(root):
    """step_tasks (12 steps: fixed by doubling the turn limit; 1 step: always passed) and 3 of 40
    steps that only a later candidate fixes: a share of validation tasks then shows a gain that
    depends on which tasks it holds, so the order each candidate draws reaches the gate's rows."""
    tasks = step_tasks(root)
    for i in range(3):
        d = root / f"long-{i}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "check.sh").write_text(CHECK.format(n=40))
        tasks.append(tasks[0].model_copy(update={
            "id": f"long-{i}", "source_dir": d, "instruction": "Write the numbers 1 to 40 to /app/out.txt, one per line.",
            "verifier": Verifier(files=[(d / "check.sh", "/tests/check.sh")], command="bash /tests/check.sh",
                                 timeout_s=30),
            "solution": tasks[0].solution.model_copy(update={"steps": [f"echo {k} >> /app/out.txt"
                                                                       for k in range(1, 41)]})}))
    return tasks


def ledger(tmp_path, backend, seed: int, experiment_id: str, **cfg: object) -> dict[str, list]:
    """One whole experiment (fake/solution, heuristic proposer) in its own store: its rows, with
    the experiment id taken out of every value and timestamps and random span ids left out."""
    tasks = mixed_tasks(tmp_path / "tasks")
    run = RunConfig(benchmark="local-steps", model="fake/solution", meta_model="heuristic", trials=1, seed=seed,
                    split=(0.25, 0.5, 0.25), max_iterations=4, concurrency=2, max_trials=50, **cfg)
    with Store(tmp_path / "s.duckdb") as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(run, "minimal", tasks), store=store, backend=backend,
                               tracing=tracing, experiment_id=experiment_id)
        exp.run()
        tracing.shutdown()
        where, args = "experiment_id = ?", [experiment_id]
        rows = {"experiment": [(r.splits, r.result["stop_reason"]) for r in store.select(ExperimentRecord, where, args)],
                "candidates": store.select(Candidate, where, args, order="iteration"),
                "gate_decisions": store.select(GateDecision, where, args),
                "budget_ledger": store.select(Spend, where, args),
                "trials": [{"candidate_id": r.candidate_id, "split": r.split, "task_id": r.task_id,
                            "attempt": r.attempt, "score": r.score, "status": r.status}
                           for r in store.select(TrialResult, where, args)]}
        order = {c.candidate_id: c.iteration for c in rows["candidates"]}
        rows["gate_decisions"].sort(key=lambda d: (order[d.candidate_id], d.decided_at))  # written in this order
        rows["budget_ledger"].sort(key=lambda s: (s.kind, s.candidate_id or "", s.ref or ""))  # trials finish in any order
        rows["trials"].sort(key=lambda t: (order[t["candidate_id"]], t["split"], t["task_id"], t["attempt"]))
    return {table: [_plain(r, experiment_id) for r in rs] for table, rs in rows.items()}


def _plain(value, experiment_id: str):
    if hasattr(value, "model_dump"):
        value = {k: v for k, v in value.model_dump(mode="json").items() if k not in SKIP}
    if isinstance(value, dict):
        return {k: _plain(v, experiment_id) for k, v in value.items() if k not in ("spans", "span_ids")}
    if isinstance(value, list):
        return [_plain(v, experiment_id) for v in value]
    return value.replace(experiment_id, "EXP") if isinstance(value, str) else value


def test_two_runs_with_one_seed_write_the_same_ledger_and_another_seed_does_not(tmp_path, backend):
    a = ledger(tmp_path / "a", backend, 3, "exp-20260101-000000-aaaa")
    b = ledger(tmp_path / "b", backend, 3, "exp-20261231-235959-bbbb")
    assert any(d["stage"] == "select" for d in a["gate_decisions"]), "no candidate reached the staged gate"
    # The trial-count stop counts the trials in flight: exactly max_trials before the sealed test,
    # whichever of the 2 running at once finished first.
    assert a["experiment"][0][1] == "max trials (50) reached"
    assert sum(t["split"] != "test" for t in a["trials"]) == 50
    for table in a:
        assert len(a[table]) == len(b[table]), table
        for i, (x, y) in enumerate(zip(a[table], b[table])):
            assert x == y, (table, i)
    c = ledger(tmp_path / "c", backend, 4, "exp-20260101-000000-aaaa")
    assert c["experiment"] != a["experiment"] or c["gate_decisions"] != a["gate_decisions"]


def test_a_candidates_draws_follow_the_seed_and_its_position_not_its_id():
    """The label the gate seeds from: the run's seed and the candidate's iteration; an experiment
    stored before `seeded_by` existed keeps drawing from the candidate id, as it began."""
    rule = SequentialRule()
    assert rule.draw_label("exp-1/c2", 0, 2) == rule.draw_label("exp-2/c2", 0, 2)
    assert len({rule.draw_label("exp-1/c2", s, i) for s in (0, 1) for i in (1, 2)}) == 4
    stored = rule.model_dump(mode="json")
    del stored["seeded_by"]
    old = SequentialRule.model_validate(stored)
    assert old.seeded_by == "candidate_id" and old.draw_label("exp-1/c2", 0, 2) == "exp-1/c2"
    assert SequentialRule.model_validate({"alpha": 0.1}).seeded_by == "run_seed"
    config = RunConfig(benchmark="b", model="fake/solution").model_dump(mode="json")  # as experiments.config holds it
    assert RunConfig.model_validate(config).gate.seeded_by == "run_seed"
    del config["gate"]["seeded_by"]  # an experiment stored before the field: resumes drawing as it began
    assert RunConfig.model_validate(config).gate.seeded_by == "candidate_id"

    tasks = [f"t{i:02d}" for i in range(10)]
    base = {t: [0.0] for t in tasks}

    def first_share(label: str | None, cid: str = "exp-1/c1") -> list[str]:
        asked: list[list[str]] = []
        validate(cid, tasks, base, NoiseFloor.measure(base), 1, rule, AlphaSpending(),
                 child=lambda ts, r: asked.append(ts) or {t: [0.0] for t in ts},
                 confirm=lambda r: {}, reserve=lambda r: {}, label=label)
        return asked[0]

    assert first_share(None) == first_share("exp-1/c1")  # no label: the candidate id, as before
    firsts = {tuple(first_share(rule.draw_label("exp-1/c1", s, 1))) for s in range(8)}
    assert len(firsts) > 1
    assert first_share(rule.draw_label("exp-1/c1", 5, 1)) == first_share(rule.draw_label("exp-9/c1", 5, 1), "exp-9/c1")
