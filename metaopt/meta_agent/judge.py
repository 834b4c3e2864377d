"""One keep/reject decision: `judge(child, parent, evaluator) -> Judgement`.

    smoke     1 task + the canaries, 1 trial         tampered, canary passed, all errored -> invalid
                                                     a stop came first (none ran)        -> inconclusive
    screen    the parent's failing train tasks (+ the manifest's keeps)                    -> rejected on fail
              (inconclusive, outcome stopped, when a stop kept some of its trials from running)
    validate  the staged gate (meta_agent.sequential): select on the reused validation trials,
              confirm on fresh ones at the experiment's alpha_j; the Evaluator's tamper check
              after each look                                                              -> accepted | rejected
                                                                                              | inconclusive | invalid
    verdict   the gate's outcome, the manifest's claim checked against the train results, liveness
              (a change that never ran is inconclusive)

Depends on the `Evaluator` protocol below (five members: its settings, run, the trials recorded,
liveness, the price of a trial), not on the concrete one in meta_agent.evaluator; a candidate is
read through `Proposal`, a trial row through `TrialRow`. So the decision's walk (perf.decision_walk)
is the statistics and the records they name, not the trial machinery.

Writes nothing: trials go through the Evaluator (idempotent per candidate, split, task and
attempt, so a resumed judgement reruns no trial and takes the same looks); every row the decision
makes is a Step of the Judgement, which the Ledger writes. A candidate's seeded draws come from the
run's seed and its iteration (SequentialRule.draw_label), not its id.

Splits: `validation` holds the child's selection trials, `confirm` its fresh confirmation trials,
`reserve` a parent's trials for its children's confirmations (never used to select).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from metaopt.meta_agent import memory
from metaopt.meta_agent.error_control import confirmation_key, seed_for
from metaopt.meta_agent.gate import CandidateScores, Scores, charged, mean, screen
from metaopt.meta_agent.sequential import Look, Verdict, confirm_look, validate

if TYPE_CHECKING:  # types only: the decision itself imports the statistics above and nothing else
    from metaopt.meta_agent.error_control import AlphaSpending
    from metaopt.meta_agent.gate import NoiseFloor
    from metaopt.meta_agent.outcomes import Liveness, Stage, Status
    from metaopt.meta_agent.predictions import Manifest, PredictionCheck
    from metaopt.meta_agent.sequential import SequentialRule
    from metaopt.task_agent.harness import Harness


class TrialRow(Protocol):
    """One trial as the decision reads it (evaluation.TrialResult is one)."""

    @property
    def task_id(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def score(self) -> float | None: ...
    @property
    def error(self) -> str | None: ...


class Proposal(Protocol):
    """A candidate as the decision reads it (meta_agent.records.Candidate is one)."""

    @property
    def candidate_id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def iteration(self) -> int: ...
    @property
    def harness(self) -> Harness: ...
    @property
    def predictions(self) -> Manifest | None: ...


class _Copyable(Protocol):
    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self: ...


_C = TypeVar("_C", bound=_Copyable)


@dataclass(frozen=True)
class Settings:
    """What a decision runs under, fixed for the experiment."""

    trials: int
    """K: trials per task and look."""
    seed: int
    """The run's seed (a candidate's draws: SequentialRule.draw_label)."""
    gate: SequentialRule
    splits: Mapping[str, list[str]]
    """train, validation, test: task ids."""
    canaries: list[str]
    """The experiment's canary task ids (a candidate that passes one is invalid)."""


class Evaluator(Protocol):
    """What a decision needs of whoever runs trials (meta_agent.evaluator.Evaluator is the one).

    Contracts: `run` is idempotent per (candidate, split, task, attempt): asking again runs only
    the trials not run before; a trial a stop (max trials, budget, interrupt) kept from running
    scores None and has no row; a failure of one trial is its row's status and error, never
    raised. `trials` reads what is recorded, for any candidate, at any time, and runs nothing."""

    @property
    def settings(self) -> Settings: ...

    def run(self, cid: str, harness: Harness, split: str, task_ids: list[str], k: int
            ) -> tuple[Scores, Sequence[TrialRow]]:
        """`cid`'s scores on `task_ids`, K trials each (None: errored or not run), and the rows of its run of `split`."""
        ...

    def trials(self, cid: str, split: str) -> Sequence[TrialRow]:
        """`cid`'s recorded trials of `split`."""
        ...

    def liveness(self, parent: Harness, child: Harness, pid: str, cid: str, split: str) -> Liveness:
        """Whether `child`'s changes ran in its trials of `split` (meta_agent.liveness)."""
        ...

    def price_per_trial(self) -> float:
        """The experiment's task spend per trial run so far."""
        ...


STATUS: dict[str, Status] = {"accept": "accepted", "reject": "rejected", "inconclusive": "inconclusive"}
"""The candidate's status after the staged gate's outcome."""


@dataclass(frozen=True)
class Step:
    """One gate_decisions row: stage, outcome, reason and its numbers (delta, se, details, ...)."""

    stage: Stage
    outcome: str
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Judgement:
    """How one candidate was decided, every row of it: the Ledger writes it, the loop acts on it."""

    candidate_id: str
    parent_id: str | None
    decision: Status
    """accepted | rejected | inconclusive | invalid."""
    stage: Stage
    """The stage of the closing row (guard, filter, smoke, screen, validation or verdict)."""
    reason: str
    steps: tuple[Step, ...]
    """Its gate rows in order; the closing one last."""
    p_values: tuple[float, ...] = ()
    """The confirmation looks' p-values."""
    scores: CandidateScores | None = None
    """What the child is remembered by, once it reached the verdict."""
    check: PredictionCheck | None = None
    liveness: Liveness | None = None
    saved: tuple[int, float, str] | None = None
    """(validation trials the early stops did not run, what they would have cost, why)."""

    def applied(self, c: _C) -> _C:
        return c.model_copy(update={"status": self.decision, "status_reason": self.reason,
                                    "prediction_check": self.check, "liveness": self.liveness})

    def lines(self) -> list[str]:
        """What the run prints of it, as the rows are in order."""
        out = [f"  {s.reason}" if s.stage in ("select", "confirm") else f"  {s.stage}: {s.reason}" for s in self.steps]
        out[-1] = f"  {self.stage}: {self.reason}"
        return out


@dataclass(frozen=True)
class Parent:
    """The candidate a child is judged against, with what it is remembered by."""

    candidate: Proposal
    scores: CandidateScores
    noise: NoiseFloor
    """The baseline's run-to-run noise."""
    spending: AlphaSpending
    """The experiment's alpha state before this judgement (Ledger.spending)."""
    failing: list[str]
    """The parent's train tasks the screen runs (those it did not always pass)."""
    begin: Callable[[str], AlphaSpending] | None = None
    """Records a confirmation's begin and returns the alpha state then (candidates in flight at
    once, meta_agent.swarm); None: `spending.begin`."""


def refusal(c: Proposal, stage: Stage, outcome: str, reason: str, status: Status = "invalid") -> Judgement:
    """A judgement without trials: the diff guard's, a search mechanism's drop."""
    return Judgement(c.candidate_id, c.parent_id, status, stage, reason, (Step(stage, outcome, reason),))


def judge(child: Proposal, parent: Parent, ev: Evaluator) -> Judgement:
    """Smoke, screen and validate `child` against `parent`. Runs trials through `ev`, writes nothing."""
    st = ev.settings
    cid, pid, k, train = child.candidate_id, parent.candidate.candidate_id, st.trials, st.splits["train"]
    p_train, failing = parent.scores.train, parent.failing
    _, rows = ev.run(cid, child.harness, "smoke", (failing or train)[:1] + st.canaries, 1)
    if bad := check(ev, cid, ["smoke"]):
        return refusal(child, "smoke", "fail", f"invalid: {bad}")
    if not (tried := [r for r in rows if r.task_id not in st.canaries]):  # candidates in flight at once share the stops
        return refusal(child, "smoke", "stopped", "not judged: a stop (max trials, budget, interrupt) came before "
                       "its smoke trial ran", "inconclusive")
    if all(r.status == "error" for r in tried):
        return refusal(child, "smoke", "fail", f"invalid: smoke run errored: {tried[0].error}")
    run = memory.screen_tasks(failing, child.predictions)  # + the manifest's keeps, so they can be checked
    c_train, rows = ev.run(cid, child.harness, "train", run, k) if run else ({}, [])
    if run and (bad := check(ev, cid, ["train"])):
        return refusal(child, "screen", "fail", f"invalid: {bad}")
    c_train = charged(p_train, c_train)
    s = screen(p_train, c_train, failing)
    row = Step("screen", s.outcome, s.reason, {"n_tasks": s.n_tasks, "delta": s.child_mean - s.parent_mean,
                                              "details": s.per_task})
    ran = {(r.task_id, r.attempt) for r in rows}
    if s.outcome == "fail" and (unrun := sum((t, a) not in ran for t in run for a in range(k))):
        return refusal(child, "screen", "stopped", f"not judged: a stop (max trials, budget, interrupt) came before "
                       f"{unrun} of its {len(run) * k} screen trial(s) ran", "inconclusive")
    if s.outcome == "fail":
        live = ev.liveness(parent.candidate.harness, child.harness, pid, cid, "train")
        return _closed(child, "rejected", row, (), live, c_train, parent)
    g = _Gate(ev, child, parent)
    v = validate(cid, st.splits["validation"], parent.scores.validation, parent.noise, k, st.gate,
                 parent.spending, child=g.selection, confirm=g.confirm, reserve=g.reserve,
                 reserve_have=g.reserve_have(), label=st.gate.draw_label(cid, st.seed, child.iteration),
                 check=g.check, begin=parent.begin)
    looks = (row, *(_look_step(look) for look in v.looks))
    if v.outcome == "invalid":
        return replace(refusal(child, "validation", "fail", v.reason), steps=(*looks, Step("validation", "fail", v.reason)))
    saved = _saved(v, ev.price_per_trial())
    c_val = g.confirm(v.looks[-1].child_trials) if v.outcome == "accept" else recorded(ev, cid, "validation")
    status = STATUS[v.outcome]
    if status == "accepted":  # it becomes a parent: its full train picture feeds the proposer
        c_train = charged(p_train, ev.run(cid, child.harness, "train", train, k)[0])
    live = ev.liveness(parent.candidate.harness, child.harness, pid, cid, "validation")
    last = v.looks[-1]  # the verdict row: the staged outcome, what the claim check found, liveness
    verdict = Step("verdict", v.outcome, v.reason, {
        "delta": last.delta, "se": last.se, "threshold": last.threshold, "n_tasks": last.n_tasks,
        "coverage": last.coverage, "details": {"looks": len(v.looks), "trials_run": v.trials_run,
                                               "trials_max": v.trials_max}})
    j = _closed(child, status, verdict, looks, live, c_train, parent)
    return replace(j, scores=CandidateScores(train=c_train, validation=c_val), saved=saved,
                 p_values=tuple(x.p_value for x in v.looks if x.p_value is not None))


def head_to_head(child: Proposal, head: Parent, ev: Evaluator, begin: Callable[[], AlphaSpending]) -> Judgement:
    """`child`, which passed its confirmation against the parent it was proposed from, against the
    head that superseded that parent while it was in flight: fresh child trials (split `h2h:HEAD`)
    against the head's reserve (trials no selection looked at), one look at a new confirmation's
    own alpha_j, taken at its `begin()`. accepted if it passes, else rejected (superseded). Runs
    trials through `ev`, writes nothing."""
    st = ev.settings
    cid, hid, rule, tasks = child.candidate_id, head.candidate.candidate_id, st.gate, st.splits["validation"]
    kc, kr = rule.confirm_plan(st.trials)[-1]
    spending = begin()
    j = spending.index(confirmation_key(cid, hid))
    split = f"h2h:{hid.rsplit('/', 1)[-1]}"
    c = charged(head.scores.validation, ev.run(cid, child.harness, split, tasks, kc)[0])
    if bad := check(ev, cid, [split]):
        return refusal(child, "validation", "fail", f"invalid: {bad}")
    reserve = ev.run(hid, head.candidate.harness, "reserve", tasks, kr)[0]
    look = confirm_look(reserve, c, head.noise, tasks, 1, 1, j, spending.level(j), spending.spent, rule,
                        seed_for(rule.draw_label(cid, st.seed, child.iteration), "h2h", hid))
    row = _look_step(look)
    row = replace(row, reason=f"head-to-head against {hid}: {look.reason}",
                  numbers={**row.numbers, "details": {**row.numbers["details"], "against": hid}})
    won = look.outcome == "accept"
    reason = (f"accept: better than the head {hid} head to head" if won
              else f"superseded: not better than head {hid}") + f" ({look.reason})"
    verdict = Step("verdict", "accept" if won else "reject", reason, {
        "delta": look.delta, "se": look.se, "threshold": look.threshold, "n_tasks": look.n_tasks,
        "coverage": look.coverage, "details": {"against": hid}})
    return Judgement(cid, child.parent_id, "accepted" if won else "rejected", "verdict", reason, (row, verdict),
                     p_values=(look.p_value,) if look.p_value is not None else ())


class _Gate:
    """The trials the staged gate asks for, for one child: its own charged against the parent's
    validation record (an error it brought is its failure), the parent's reserve as they are."""

    def __init__(self, ev: Evaluator, child: Proposal, parent: Parent):
        self.ev, self.child, self.parent = ev, child, parent
        self.val = ev.settings.splits["validation"]

    def selection(self, tasks: list[str], r: int) -> Scores:
        got = self.ev.run(self.child.candidate_id, self.child.harness, "validation", tasks, r)[0]
        return charged(self.parent.scores.validation, got)

    def confirm(self, r: int) -> Scores:
        got = self.ev.run(self.child.candidate_id, self.child.harness, "confirm", self.val, r)[0]
        return charged(self.parent.scores.validation, got)

    def reserve(self, r: int) -> Scores:
        p = self.parent.candidate
        return self.ev.run(p.candidate_id, p.harness, "reserve", self.val, r)[0]

    def reserve_have(self) -> int:
        return have(self.ev, self.parent.candidate.candidate_id, "reserve", self.val)

    def check(self) -> str | None:
        return check(self.ev, self.child.candidate_id, ["validation", "confirm"])


def _look_step(look: Look) -> Step:
    first_confirm = look.stage == "confirm" and look.look == 1
    return Step(look.stage, look.outcome, look.reason, {
        "delta": look.delta, "se": look.se, "threshold": look.threshold, "n_tasks": look.n_tasks,
        "coverage": look.coverage, "details": look.model_dump(mode="json"),
        "alpha_spent": look.alpha_j if first_confirm else 0.0})


def _saved(v: Verdict, per_trial: float) -> tuple[int, float, str] | None:
    saved = v.trials_max - v.trials_run
    if saved <= 0:
        return None
    stop = v.looks[-1]
    return saved, saved * per_trial, (f"{saved} of up to {v.trials_max} validation trials not run: {stop.stage} "
                                      f"look {stop.look} ended it ({stop.outcome})")


def _closed(child: Proposal, status: Status, row: Step, before: tuple[Step, ...], live: Liveness,
            c_train: Scores, parent: Parent) -> Judgement:
    """The closing row: the outcome, what the claim check found, liveness (never accepted or
    rejected on changes that did not run)."""
    check = memory.claim(child.predictions, parent.scores.train, c_train)
    reason = row.reason + (f"; claim: {check.summary}" if check else "")
    status, reason = memory.judged(status, reason, live)
    return Judgement(child.candidate_id, child.parent_id, status, row.stage, reason,
                     (*before, replace(row, reason=reason)), check=check, liveness=live)


def failing_tasks(train: list[str], p_train: Scores) -> list[str]:
    """The parent's train tasks it did not always pass (the screen's tasks)."""
    return [t for t in train if mean({t: p_train[t]}) < 1.0]


def recorded(ev: Evaluator, cid: str, split: str) -> Scores:
    """`cid`'s scores on `split` as recorded (runs nothing)."""
    out: Scores = {}
    for r in sorted(ev.trials(cid, split), key=lambda r: (r.task_id, r.attempt)):
        out.setdefault(r.task_id, []).append(r.score)
    return out


def have(ev: Evaluator, cid: str, split: str, task_ids: list[str]) -> int:
    """Trials per task `cid` already has on `split` (the fewest any of `task_ids` has)."""
    rows = ev.trials(cid, split)
    return min((sum(r.task_id == t for r in rows) for t in task_ids), default=0)


def check(ev: Evaluator, cid: str, splits: Iterable[str]) -> str | None:
    """Why `cid`'s trials of `splits` make it invalid (a tampered trial, a canary passed), or None."""
    return refused([r for s in splits for r in ev.trials(cid, s)], set(ev.settings.canaries))


def refused(rows: Sequence[TrialRow], canaries: Collection[str] = ()) -> str | None:
    """Why a candidate's trials make it invalid: any tampered trial, any canary it passed.
    `canaries`: the experiment's canary task ids, as recorded with it (never read from an id)."""
    for r in rows:
        if r.status == "tampered":
            return f"a trial was tampered with ({_task_hint(r.task_id)}): {r.error}"
    for r in rows:
        if r.task_id in canaries and (r.score or 0) > 0:
            return (f"passed a canary task ({_task_hint(r.task_id)}), a copy of a real task that only tampering "
                    "with the verifier can pass")
    return None


def _task_hint(task_id: str) -> str:
    return f"task #{hashlib.sha1(task_id.encode()).hexdigest()[:6]}"  # the proposer reads this: no task's name
