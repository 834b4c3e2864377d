"""One keep/reject decision, pure: judge(child, parent, evaluator) -> Judgement from fixed trials
(a scripted evaluator that implements only the narrow `judge.Evaluator` protocol: no sandbox, no
store), and the tamper check over the concrete Evaluator's trials on a real ledger."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from datetime import datetime

from metaopt.evaluation import TrialResult
from metaopt.meta_agent import judge as judge_module
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.error_control import AlphaSpending
from metaopt.meta_agent.evaluator import Evaluator
from metaopt.meta_agent.gate import NoiseFloor, Scores
from metaopt.meta_agent.judge import Judgement, Parent, Settings, TrialRow, check, judge
from metaopt.meta_agent.ledger import Ledger
from metaopt.meta_agent.outcomes import Liveness
from metaopt.meta_agent.records import Candidate, CandidateScores
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.harness_io import load_harness, resolve_harness
from metaopt.traces.store import Store

TRAIN = [f"tr{i}" for i in range(4)]
VAL = [f"v{i}" for i in range(8)]
K = 2


class Scripted:
    """An Evaluator (the protocol's five members, nothing more): every trial of `cid` on a task
    scores what `score[cid]` says; it records what it was asked to run, and the trials of split
    `tamper` are tampered with; with `stopped` a stop came first: every run runs nothing (with
    `stop_at`, only runs of that split)."""

    def __init__(self, score: dict[str, float], tamper: str | None = None):
        self.cfg = RunConfig(benchmark="b", model="fake/solution", trials=K)
        self.splits = {"train": TRAIN, "validation": VAL, "test": []}
        self.score, self.tamper, self.ran, self.stopped = score, tamper, [], False
        self.stop_at: str | None = None
        self.rows: dict[tuple[str, str], dict[str, TrialResult]] = {}

    @property
    def settings(self) -> Settings:
        return Settings(trials=self.cfg.trials, seed=self.cfg.seed, gate=self.cfg.gate, splits=self.splits, canaries=[])

    def run(self, cid: str, harness: Harness, split: str, task_ids: list[str], k: int
            ) -> tuple[Scores, list[TrialResult]]:
        self.ran.append((cid, split))
        if self.stopped or split == self.stop_at:
            return {t: [None] * k for t in task_ids}, []
        bad = split == self.tamper
        rows = [TrialResult(trial_id=f"{cid}/{split}/{t}/{a}", run_id=f"{cid}:{split}", benchmark="b", task_id=t,
                            attempt=a, agent="a", status="tampered" if bad else "passed", score=self.score[cid],
                            error="wrote the reward" if bad else None) for t in task_ids for a in range(k)]
        self.rows.setdefault((cid, split), {}).update((r.trial_id, r) for r in rows)
        return {t: [self.score[cid]] * k for t in task_ids}, rows

    def trials(self, cid: str, split: str) -> Sequence[TrialRow]:
        return list(self.rows.get((cid, split), {}).values())

    def liveness(self, parent: Harness, child: Harness, pid: str, cid: str, split: str) -> Liveness:
        return Liveness(split=split, trials=1, live=True, reason="its changes ran")

    def price_per_trial(self) -> float:
        return 0.01


def _cand(cid: str, iteration: int, parent: str | None = None) -> Candidate:
    h = load_harness(resolve_harness("minimal"))
    return Candidate(candidate_id=cid, experiment_id="e", parent_id=parent, iteration=iteration,
                     status="pending" if parent else "baseline", harness=h, harness_hash=h.content_hash(),
                     created_at=datetime(2026, 1, 1))


def _parent(score: float) -> Parent:
    base = _cand("e/c0", 0)
    noisy = {t: [score, 1.0 - score] for t in VAL}  # a measured floor: trials disagree
    return Parent(base, CandidateScores(train={t: [score] * K for t in TRAIN}, validation=noisy),
                  NoiseFloor.measure(noisy), AlphaSpending(alpha=0.05, spend=0.8), failing=TRAIN)


def _judge(child_score: float, tamper: str | None = None) -> tuple[Judgement, Scripted]:
    ev = Scripted({"e/c0": 0.0, "e/c1": child_score}, tamper)
    return judge(_cand("e/c1", 1, "e/c0"), _parent(0.0), ev), ev


def test_the_evaluator_protocol_is_narrow_and_the_scripted_one_implements_only_it():
    members = {n for n in vars(judge_module.Evaluator) if not n.startswith("_")}
    assert members == {"settings", "run", "trials", "liveness", "price_per_trial"}
    assert {n for n in vars(Scripted) if not n.startswith("_")} == members
    assert "meta_agent.evaluator import" not in inspect.getsource(judge_module)  # no concrete Evaluator, not even for types


def test_a_clear_gain_is_accepted_with_every_row_in_order():
    j, ev = _judge(1.0)
    assert j.decision == "accepted" and j.stage == "verdict" and j.reason.startswith("accept: confirm look")
    stages = [s.stage for s in j.steps]
    assert stages[0] == "screen" and stages[-1] == "verdict" and set(stages[1:-1]) == {"select", "confirm"}
    assert j.p_values and all(0 <= p <= 0.05 for p in j.p_values[-1:])
    assert j.scores is not None and set(j.scores.train) == set(TRAIN) and set(j.scores.validation) == set(VAL)
    assert ("e/c0", "reserve") in ev.ran and j.liveness is not None and j.liveness.live


def test_a_child_no_better_than_its_parent_is_rejected_at_the_screen_before_validation():
    j, ev = _judge(0.0)
    assert (j.decision, j.stage) == ("rejected", "screen") and [s.stage for s in j.steps] == ["screen"]
    assert j.reason.startswith("fail:") and j.scores is None and j.p_values == ()
    assert not any(split in ("validation", "confirm", "reserve") for _, split in ev.ran)


def test_a_tampered_validation_trial_makes_it_invalid_after_the_look_and_before_the_reserve_runs():
    j, ev = _judge(1.0, tamper="validation")
    assert (j.decision, j.stage) == ("invalid", "validation")
    assert j.reason.startswith("invalid: a trial was tampered with (task #") and j.reason.endswith("): wrote the reward")
    assert [s.stage for s in j.steps] == ["screen", "validation"]  # refused before its first look was taken
    assert j.scores is None and j.saved is None and ("e/c0", "reserve") not in ev.ran


def test_a_child_whose_smoke_trial_a_stop_prevented_is_inconclusive_and_runs_nothing_more():
    ev = Scripted({"e/c0": 0.0, "e/c1": 1.0})
    ev.stopped = True  # other candidates in flight took the last trials of max_trials
    j = judge(_cand("e/c1", 1, "e/c0"), _parent(0.0), ev)
    assert (j.decision, j.stage, j.steps[0].outcome) == ("inconclusive", "smoke", "stopped")
    assert j.reason.startswith("not judged: a stop") and ev.ran == [("e/c1", "smoke")]


def test_a_child_whose_screen_a_stop_cut_short_is_inconclusive_not_rejected():
    ev = Scripted({"e/c0": 0.0, "e/c1": 1.0})
    ev.stop_at = "train"  # the smoke trial ran, then the stop came: the trials never run are no evidence
    j = judge(_cand("e/c1", 1, "e/c0"), _parent(0.0), ev)
    assert (j.decision, j.stage, j.steps[-1].outcome) == ("inconclusive", "screen", "stopped")
    assert "screen trial(s) ran" in j.reason and ev.ran == [("e/c1", "smoke"), ("e/c1", "train")]


def test_judge_is_pure_same_inputs_same_judgement():
    assert _judge(1.0)[0] == _judge(1.0)[0]
    assert _judge(0.0)[0] == _judge(0.0)[0]


def _trial(cid: str, split: str, task: str, status: str, score: float) -> TrialResult:
    return TrialResult(trial_id=f"{cid}/{split}/{task}", run_id=f"{cid}:{split}", benchmark="b", task_id=task,
                       attempt=0, agent="a", status=status, score=score, experiment_id="e", candidate_id=cid,
                       split=split, error="tampered (reward): written by the agent" if status == "tampered" else None)


def test_the_evaluators_tamper_check_reads_each_candidates_own_trials(tmp_path):
    with Store(tmp_path / "s.duckdb") as store:
        ledger = Ledger(store, "e")
        ev = Evaluator(RunConfig(benchmark="b", model="fake/solution"), {}, {}, ledger, canaries=["t1-2"],
                       backend=None, tracing=None)
        store.insert(_trial("e/c1", "validation", "t1", "passed", 1.0))
        store.insert(_trial("e/c2", "validation", "t1", "tampered", 0.0))
        store.insert(_trial("e/c3", "smoke", "t1-2", "passed", 1.0))
        assert check(ev, "e/c1", ["validation", "confirm"]) is None
        assert "tampered" in (check(ev, "e/c2", ["validation", "confirm"]) or "")  # two candidates judged at once
        assert check(ev, "e/c2", ["train"]) is None  # only the splits asked about
        assert "canary" in (check(ev, "e/c3", ["smoke"]) or "")


def test_the_run_report_round_trips_through_its_json_and_keeps_the_keys_in_order():
    from metaopt.meta_agent.report import ORDER, CandidateReport, RunReport

    c = CandidateReport(id="e/c0", status="baseline", parent=None, rationale=None, val_mean=0.5)
    r = RunReport(experiment_id="e", baseline_test_score=0.5, baseline_test_ci=[0.1, 0.9], best_test_score=0.5,
                  best_test_ci=[0.1, 0.9], best_candidate="e/c0", iterations=0, accepted=0, spend_usd=0.0,
                  spend={"task": 0.0, "meta": 0.0}, stop_reason="plateau", candidates=[c], progress_png="p.png",
                  validation_trials_saved=0, alpha_committed=0.0, alpha=0.05)
    d = r.to_dict()
    assert list(d) == [k for k in ORDER if k not in ("bilevel", "audit")] and d["candidates"][0]["id"] == "e/c0"
    assert RunReport.from_dict(d) == r
    with_bilevel = RunReport.from_dict({**d, "bilevel": {"mechanisms": []}})
    assert list(with_bilevel.to_dict())[-1] == "bilevel"
