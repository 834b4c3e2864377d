"""`metaopt compare A B`: two runs, experiment candidates or imported Harbor jobs, paired by task,
tested with the gate's exact stratified test. Real DuckDB stores filled by the tables' writers
(Store.begin_run / insert / end_run as `metaopt eval` writes, the experiment's Ledger, the Harbor
job importer); the command through the real CLI. No Docker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from metaopt.core.errors import NotFound
from metaopt.evaluation.harbor_jobs import import_job
from metaopt.meta_agent.compare import compare
from metaopt.meta_agent.ledger import Ledger
from metaopt.task_agent.harness_io import load_harness, resolve_harness
from metaopt.traces.store import Store
from metaopt.traces.tables import TrialResult
from metaopt.traces.tracing import Tracing

JOBS = Path(__file__).parent / "data" / "harbor_jobs"
TASKS = [f"t{i:02d}" for i in range(12)]
E = "exp-cmp"


def _run(store: Store, run_id: str, scores: dict[str, list[float | None]], *, agent: str = "minimal@fake/solution",
         experiment: tuple[str, str] | None = None) -> None:
    """One run as the trial runner writes it: the run row, one trial row per attempt (None: an
    errored trial, NULL score), the run closed. `experiment`: (candidate id, split) of its trials."""
    store.begin_run(run_id, benchmark="terminalbench-sample", agent=agent, dataset=None, args={})
    for task, trials in scores.items():
        for attempt, s in enumerate(trials):
            status = "error" if s is None else "passed" if s == 1.0 else "failed"
            store.insert(TrialResult(
                trial_id=f"{run_id}/{task}/{attempt}", run_id=run_id, benchmark="terminalbench-sample", task_id=task,
                attempt=attempt, agent=agent, score=s, status=status, error="image build failed" if s is None else None,
                experiment_id=experiment[0].rsplit("/", 1)[0] if experiment else None,
                candidate_id=experiment[0] if experiment else None, split=experiment[1] if experiment else None))
    store.end_run(run_id, "finished")


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    """run-a passes 3 of 12 tasks; run-b all 12 (and errors once on t99, and never ran t-only-a);
    run-c and run-d: the same 12 tasks twice each, scored alike (0, 0.5 or 1 in turn)."""
    path = tmp_path_factory.mktemp("compare") / "m.duckdb"
    with Store(path) as store:
        _run(store, "run-a", {**{t: [1.0 if i < 3 else 0.0] for i, t in enumerate(TASKS)}, "t-only-a": [1.0]})
        _run(store, "run-b", {**{t: [1.0] for t in TASKS}, "t99": [None]})
        same = {t: [(i % 3) / 2, ((i + 1) % 3) / 2] for i, t in enumerate(TASKS)}
        _run(store, "run-c", same)
        _run(store, "run-d", {t: list(reversed(s)) for t, s in same.items()})
        # an experiment: c0 the baseline, c1 accepted; their validation and test trials count, not smoke or train
        base = load_harness(resolve_harness("minimal"))
        led = Ledger(store, E)
        led.create("terminalbench-sample", {}, {"train": ["x"], "validation": TASKS[:6], "test": TASKS[6:]})
        led.add_candidate(f"{E}/c0", base, iteration=0, status="baseline")
        led.add_candidate(f"{E}/c1", base, iteration=1, status="pending", parent_id=f"{E}/c0")
        led.set_status(f"{E}/c1", "accepted", "confirmed")
        led.decision(f"{E}/c1", f"{E}/c0", "verdict", "accept", "accept", "staged gate")
        for cid, passed in (("c0", 2), ("c1", 6)):
            scores = {t: [1.0 if i < passed else 0.0] * 2 for i, t in enumerate(TASKS)}
            _run(store, f"{E}/{cid}:validation", {t: scores[t] for t in TASKS[:6]}, experiment=(f"{E}/{cid}", "validation"))
            _run(store, f"{E}/{cid}:test", {t: scores[t] for t in TASKS[6:]}, experiment=(f"{E}/{cid}", "test"))
            _run(store, f"{E}/{cid}:smoke", {"x": [0.0 if cid == "c1" else 1.0]}, experiment=(f"{E}/{cid}", "smoke"))
        for job in ("exp1", "nop9"):
            tracing = Tracing.for_store(store)
            try:
                import_job(store, JOBS / job, tracing=tracing)
            finally:
                tracing.shutdown()
    return path


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metaopt.cli", "compare", *args, "--db", str(db)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_b_clearly_better_is_shown_with_its_interval_and_exact_p(db):
    with Store(db, read_only=True) as store:
        c = compare(store, "run-a", "run-b")
    assert (c.n, c.better, c.only_a, c.only_b) == (12, "b", ["t-only-a"], ["t99"])  # t99: only errored
    assert (c.a.trials, c.a.errors, c.b.trials, c.b.errors) == (13, 0, 13, 1)
    assert c.mean_a == 0.25 and c.mean_b == 1.0 and c.delta == 0.75
    # 9 tasks changed, every one towards B: one-sided p = 2^-9 (the sign test the stratified test is at K = 1)
    assert c.p_value == pytest.approx(2 * 0.5 ** 9)
    assert c.ci is not None and 0 < c.ci[0] < 0.75 < c.ci[1] <= 1.0
    assert c.test.startswith("exact stratified test (binary scores), two-sided")
    assert c.p_floor is None  # a difference was shown: no floor to explain
    assert c.verdict == f"B is better than A on 12 paired tasks: +0.75 (95% CI {c.ci[0]:+.2f} to +1.00), p = 0.004"
    assert [(r.task, r.a, r.b, r.change) for r in c.tasks[:4]] == [
        ("t00", 1.0, 1.0, 0.0), ("t01", 1.0, 1.0, 0.0), ("t02", 1.0, 1.0, 0.0), ("t03", 0.0, 1.0, 1.0)]
    with Store(db, read_only=True) as store:
        back = compare(store, "run-b", "run-a")
    assert (back.better, back.delta, back.p_value) == ("a", -0.75, c.p_value)
    assert back.verdict.startswith("B is worse than A on 12 paired tasks: -0.75 (95% CI -1.00 to ")


def test_equal_runs_show_no_difference(db):
    with Store(db, read_only=True) as store:
        c = compare(store, "run-c", "run-d")
    assert (c.n, c.better, c.delta) == (12, None, 0.0)
    assert c.p_value is not None and c.p_value > 0.5
    assert c.test.startswith("stratified permutation test") and c.p_floor is None
    assert c.ci is not None and c.ci[0] < 0 < c.ci[1]
    assert c.verdict.startswith("no difference shown on 12 paired tasks: +0.00 (95% CI -")
    with Store(db, read_only=True) as store:
        again = compare(store, "run-d", "run-c")  # the seed is the pair's, in either order
    assert again.p_value == c.p_value


def test_experiment_candidate_and_split_runs_resolve(db):
    with Store(db, read_only=True) as store:
        best = compare(store, f"{E}/c0", E)  # the experiment: its head, c1
        val = compare(store, f"{E}/c0:validation", f"{E}/c1:validation")
    assert (best.a.kind, best.a.ref, best.b.kind, best.b.ref) == ("candidate", f"{E}/c0", "experiment", f"{E}/c1")
    assert best.n == 12 and "x" not in best.only_a + best.only_b  # smoke trials are not a candidate's
    assert (best.mean_a, best.mean_b, best.better) == (2 / 12, 6 / 12, "b")
    assert (val.n, val.a.kind, val.delta) == (6, "run", 4 / 6)
    with Store(db) as store:
        Ledger(store, E).finish("finished", {"best_candidate": f"{E}/c0"})  # the report's best wins
        same = compare(store, f"{E}/c0", E)
    assert (same.b.ref, same.delta, same.p_value, same.better, same.p_floor) == (f"{E}/c0", 0.0, 1.0, None, 1.0)


def test_harbor_jobs_by_name_through_the_cli(db):
    r = _cli(db, "nop9", "exp1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "A: harbor job nop9 -> harbor-nop9 (nop): 9 trials, 0 errored" in out
    assert "rename-api-sed" in out and "secure-permissions" in out and "+1.000" in out
    assert "A only (not run or only errored on the other side; not in the test): access-log-offenders," in out
    last = out.rstrip().splitlines()[-1]  # 2 tasks: the exact test cannot go below 0.5, and says so
    assert last.startswith("no difference shown on 2 paired tasks: +1.00 (95% CI") and last.endswith(
        "p = 0.500; these tasks cannot show one at 5%: the test's smallest p on them is 0.500")
    j = _cli(db, "run-a", "run-b", "--json")
    assert j.returncode == 0, j.stderr
    data = json.loads(j.stdout)
    assert data["verdict"].startswith("B is better than A on 12 paired tasks: +0.75")
    assert data["better"] == "b" and data["b"]["errors"] == 1 and data["tasks"][3] == {
        "task": "t03", "a": 0.0, "b": 1.0, "change": 1.0}


def test_an_unknown_name_is_one_line_exit_2(db, tmp_path):
    r = _cli(db, "run-a", "no-such-run")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert "'no-such-run'" in r.stderr and r.stderr.startswith("error: no run, experiment, candidate or Harbor job")
    with Store(db, read_only=True) as store, pytest.raises(NotFound, match="'nothing'"):
        compare(store, "nothing", "run-a")
    assert _cli(tmp_path / "none.duckdb", "a", "b").returncode == 2
