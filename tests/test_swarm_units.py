"""The concurrency rule of `--parallel N` (meta_agent.swarm), pure or on a small store: alpha_j
goes by the order confirmations *begin* (written at begin), and a child whose parent was
superseded while it was in flight becomes head only by beating the head, head to head."""

from __future__ import annotations

import threading
import time

import pytest
from test_judge import TRAIN, VAL, Scripted, _cand

from metaopt.core.errors import UserError
from metaopt.evaluation import TrialResult
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.error_control import AlphaSpending
from metaopt.meta_agent.gate import CandidateScores, NoiseFloor, Scores
from metaopt.meta_agent.judge import Parent, head_to_head
from metaopt.meta_agent.ledger import Ledger
from metaopt.meta_agent.proposers import Evidence, get_proposer
from metaopt.meta_agent.records import Candidate, GateDecision
from metaopt.meta_agent.search.strategies.hooks import NoSearch
from metaopt.meta_agent.sequential import SequentialRule
from metaopt.meta_agent.steps import Steps
from metaopt.meta_agent.swarm import _Loop
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.messages import Message, ModelSettings
from metaopt.task_agent.models import ModelConfigError, get_model
from metaopt.task_agent.models.fake import needs_task
from metaopt.traces.store import Store

GATE = SequentialRule(alpha=0.05, spend=0.8)
LEVEL = AlphaSpending(alpha=0.05, spend=0.8).level


def test_alpha_j_follows_the_order_confirmations_began_whatever_order_they_finish_in(tmp_path):
    with Store(tmp_path / "s.duckdb") as store:
        led = Ledger(store, "e")
        led.create("b", {}, {"train": [], "validation": [], "test": []})
        for i in range(4):
            h = _cand(f"e/c{i}", i).harness
            led.add_candidate(f"e/c{i}", h, iteration=i, status="pending" if i else "baseline")
        assert led.begin_confirmation("e/c3", "e/c0", GATE, "rule").index("e/c3") == 1  # c3 began first
        time.sleep(0.001)
        s = led.begin_confirmation("e/c1", "e/c0", GATE, "rule")
        assert s.index("e/c1") == 2 and s.confirmed == ("e/c3", "e/c1")
        led.decision("e/c1", "e/c0", "confirm", "accept", "c1 finishes first", "rule", details={"look": 1})
        again = led.begin_confirmation("e/c3", "e/c0", GATE, "rule")  # a resumed confirmation keeps its j
        assert again.index("e/c3") == 1 and again == led.spending(GATE)
        time.sleep(0.001)
        h2h = led.begin_confirmation("e/c1", "e/c0", GATE, "rule", against="e/c3")  # its own, new alpha_j
        assert h2h.confirmed == ("e/c3", "e/c1", "e/c1 vs e/c3") and h2h.spent == pytest.approx(
            sum(GATE.alpha * GATE.spend * (1 - GATE.spend) ** j for j in range(3)))
        begins = [d for d in store.select(GateDecision) if d.outcome == "begin"]
        assert [d.details["j"] for d in begins] == [1, 2, 3]
        assert all(d.alpha_spent == 0.0 for d in begins)  # the first confirm look commits it, as before


def test_without_begin_rows_alpha_spending_is_as_before():
    rows = [{"candidate_id": "c2", "stage": "confirm"}, {"candidate_id": "c1", "stage": "confirm"},
            {"candidate_id": "c2", "stage": "confirm", "details": {"look": 2}},
            {"candidate_id": "c2", "stage": "confirm", "details": {"look": 1, "against": "c1"}}]
    assert AlphaSpending.from_rows(rows).confirmed == ("c2", "c1", "c2 vs c1")
    assert AlphaSpending.from_rows(rows[:3]).confirmed == ("c2", "c1")


class PerTask(Scripted):
    """Scripted, with a score per candidate and task (tasks named ...0-5 pass under `half`)."""

    def __init__(self, score: dict[str, str]):
        super().__init__({})
        self.kind = score
        self.abort = threading.Event()

    def _score(self, cid: str, task: str) -> float:
        kind = self.kind[cid]
        return 1.0 if kind == "all" else 0.0 if kind == "none" else float(task[-1] in "012345")

    def run(self, cid: str, harness: Harness, split: str, task_ids: list[str], k: int
            ) -> tuple[Scores, list[TrialResult]]:
        self.ran.append((cid, split))
        rows = [TrialResult(trial_id=f"{cid}/{split}/{t}/{a}", run_id=f"{cid}:{split}", benchmark="b", task_id=t,
                            attempt=a, agent="a", status="passed", score=self._score(cid, t))
                for t in task_ids for a in range(k)]
        return {t: [self._score(cid, t)] * k for t in task_ids}, rows

    def recorded(self, cid: str, split: str) -> Scores:
        return {t: [self._score(cid, t)] * 2 for t in VAL}


class Driver(Steps):
    """An experiment's steps over a real ledger and a scripted evaluator, its parents' records scripted."""

    def __init__(self, store: Store, kinds: dict[str, str]):  # its collaborators set here, not built
        self.id, self.rule, self.scores, self.said = "e", "rule", {}, []
        self.say = self.said.append
        self.cfg = RunConfig(benchmark="b", model="fake/solution", trials=2, parallel=2, gate=GATE)
        self.ledger = Ledger(store, "e")
        self.ledger.create("b", {}, {"train": TRAIN, "validation": VAL, "test": []})
        self.evaluator = PerTask(kinds)
        self.evaluator.cfg = self.cfg
        self.guard = type("G", (), {"check": staticmethod(lambda *a, **k: None)})()
        self.search = NoSearch()
        self.cands = [self.ledger.add_candidate(f"e/c{i}", _cand("e/c0", 0).harness.model_copy(
            update={"name": f"h{i}"}), iteration=i, status="pending" if i else "baseline",
            parent_id="e/c0" if i else None) for i in range(len(kinds))]

    def parent(self, p: Candidate, noise: NoiseFloor) -> Parent:
        ev = self.evaluator
        s = CandidateScores(train={t: [ev._score(p.candidate_id, t)] * 2 for t in TRAIN},
                            validation=ev.recorded(p.candidate_id, "validation"))
        return Parent(p, s, noise, self.ledger.spending(GATE), failing=TRAIN)


@pytest.mark.parametrize("second, outcome", [("half", "rejected"), ("all", "accepted")])
def test_a_child_whose_parent_was_superseded_becomes_head_only_by_beating_the_head(tmp_path, second, outcome):
    """c1 and c2 are children of c0, both better than it; c1 is decided first and becomes head.
    c2 then passes against c0 but is confirmed head to head against c1 (a new confirmation, j = 3):
    as good as c1 it is rejected, better than c1 it becomes head."""
    with Store(tmp_path / "s.duckdb") as store:
        d = Driver(store, {"e/c0": "none", "e/c1": "half", "e/c2": second})
        swarm = _Loop(d, d.cands, NoiseFloor.measure({t: [0.0, 1.0] for t in VAL}), set())
        assert swarm._decide(d.cands[1]).status == "accepted" and swarm.head == "e/c1"
        c2 = swarm._decide(d.cands[2])
        assert c2.status == outcome
        rows = [r for r in store.select(GateDecision, "candidate_id = 'e/c2'") if r.stage in ("confirm", "verdict")]
        begins = [r.details for r in rows if r.outcome == "begin"]
        assert begins == [{"j": 2, "alpha_j": pytest.approx(LEVEL(2))},
                          {"j": 3, "alpha_j": pytest.approx(LEVEL(3)), "against": "e/c1"}]
        verdicts = [r for r in rows if r.stage == "verdict"]
        assert verdicts[0].outcome == "accept" and verdicts[0].reason.endswith("head to head next")
        assert len(verdicts) == 2 and verdicts[1].details == {"against": "e/c1"}
        if outcome == "rejected":
            assert c2.status_reason.startswith("superseded: not better than head e/c1")
            assert swarm.head == d.ledger.head() == "e/c1"
        else:
            assert swarm.head == d.ledger.head() == "e/c2"
        assert ("e/c2", "h2h:c1") in d.evaluator.ran and ("e/c1", "reserve") in d.evaluator.ran


def test_head_to_head_alone_is_one_confirmation_at_its_own_alpha_j():
    ev = PerTask({"e/c1": "half", "e/c2": "half"})
    head = Parent(_cand("e/c1", 1, "e/c0"), CandidateScores(validation=ev.recorded("e/c1", "validation")),
                  NoiseFloor.measure({t: [0.0, 1.0] for t in VAL}), AlphaSpending(), failing=[])
    begun = AlphaSpending(alpha=0.05, spend=0.8, confirmed=("e/c1", "e/c2", "e/c2 vs e/c1"))
    j = head_to_head(_cand("e/c2", 2, "e/c0"), head, ev, lambda: begun)  # type: ignore[arg-type]
    assert j.decision == "rejected" and j.reason.startswith("superseded: not better than head e/c1")
    look = j.steps[0].numbers["details"]
    assert look["j"] == 3 and look["alpha_j"] == pytest.approx(begun.level(3)) and look["against"] == "e/c1"


def test_latency_fakes_wait_and_otherwise_behave_as_what_they_wrap():
    m = get_model("fake/slow:0.05:nop")
    t0 = time.monotonic()
    r = m.generate([Message.user("hi")], [], ModelSettings(model="x"))
    assert time.monotonic() - t0 >= 0.05 and r.message.text == "I will do nothing." and len(m.calls) == 1
    assert m.name == "fake/slow:0.05:nop"
    assert needs_task("fake/slow:1:flaky:0.5") and not needs_task("fake/slow:1:nop")
    for bad in ("fake/slow:x:nop", "fake/slow:1"):
        with pytest.raises(ModelConfigError, match="fake/slow:SECONDS:MODEL"):
            get_model(bad)
    p = get_proposer("placebo:0.05")
    assert p.name == "placebo" and p.latency_s == 0.05  # type: ignore[attr-defined]
    with pytest.raises(UserError, match="placebo:x"):
        get_proposer("placebo:x")
    parent = _cand("e/c0", 0).harness
    ev = Evidence(store=None, trial_ids=[], experiment_id="e")  # type: ignore[arg-type]
    first = p.propose(parent, ev, set())
    beside = p.propose(parent, Evidence(store=None, trial_ids=[], experiment_id="e", slot=1), set())  # type: ignore[arg-type]
    assert first and beside and "#1" in first.rationale and "#2" in beside.rationale
