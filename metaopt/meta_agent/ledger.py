"""The experiment ledger: experiments, candidates, gate decisions and spend, as typed store rows.

The only writer of decisions: candidates, their gate rows and statuses (`record`, from a
Judgement), head moves and the experiment's end. Everything the optimizer decides is written here
before it acts on it, so a reader (or a resumed run) can explain every step from the store alone.
"""

from __future__ import annotations

import difflib
import json
import threading
from typing import TYPE_CHECKING, Any

from metaopt.evaluation.result import TrialResult
from metaopt.meta_agent import records
from metaopt.meta_agent.error_control import AlphaSpending, confirmation_key
from metaopt.meta_agent.outcomes import Liveness, Stage, Status
from metaopt.meta_agent.predictions import Manifest, PredictionCheck
from metaopt.meta_agent.records import Candidate, ExperimentRecord, GateDecision, Spend, SpendKind
from metaopt.meta_agent.sequential import Look, SequentialRule
from metaopt.task_agent.harness import Harness
from metaopt.traces.store import Store, now

if TYPE_CHECKING:
    from metaopt.meta_agent.judge import Judgement


class Ledger:
    def __init__(self, store: Store, experiment_id: str):
        self.store, self.id = store, experiment_id
        self.lock = threading.RLock()
        """Held while a decision is written (candidates judged at once write one at a time)."""

    # -- experiment ------------------------------------------------------------------------
    def create(self, benchmark: str, config: dict[str, Any], splits: dict[str, list[str]]) -> None:
        self.store.insert(ExperimentRecord(experiment_id=self.id, benchmark=benchmark, config=config,
                                           splits=splits, status="running", started_at=now()))

    def experiment(self) -> ExperimentRecord | None:
        found = self.store.select(ExperimentRecord, "experiment_id = ?", [self.id])
        return found[0] if found else None

    def finish(self, status: str, result: dict[str, Any] | None = None) -> None:
        records.finish_experiment(self.store, self.id, status, now(), result)

    # -- candidates ------------------------------------------------------------------------
    def add_candidate(self, cid: str, harness: Harness, *, iteration: int, status: Status, parent: Harness | None = None,
                      parent_id: str | None = None, proposer: str | None = None, rationale: str | None = None,
                      evidence: list[str] | None = None, proposal_trace_id: str | None = None,
                      predictions: Manifest | None = None,
                      mechanisms: list[str] | None = None) -> Candidate:
        c = Candidate(candidate_id=cid, experiment_id=self.id, parent_id=parent_id, iteration=iteration,
                      status=status, proposer=proposer, rationale=rationale, evidence=evidence or [],
                      mechanisms=mechanisms or [],
                      diff=diff(parent, harness) if parent is not None else None, harness=harness,
                      harness_hash=harness.content_hash(), created_at=now(), proposal_trace_id=proposal_trace_id,
                      predictions=predictions)
        self.store.insert(c)
        return c

    def set_status(self, cid: str, status: str, reason: str) -> None:
        records.set_candidate_status(self.store, cid, status, reason)

    def set_checks(self, cid: str, check: PredictionCheck | None, liveness: Liveness | None) -> None:
        """Record what the candidate's claim and its spans showed (meta_agent.memory)."""
        records.set_candidate_checks(self.store, cid, check, liveness)

    def candidates(self) -> list[Candidate]:
        return self.store.select(Candidate, "experiment_id = ?", [self.id], order="iteration")

    # -- decisions and spend ---------------------------------------------------------------
    def record(self, j: Judgement, rule: str) -> None:
        """Write a judgement: its gate rows in order (a look already written before an interruption
        is not written again), the validation trials its early stops saved, then the candidate's
        status and what its claim check and liveness found."""
        with self.lock:
            self._record(j, rule)

    def _record(self, j: Judgement, rule: str) -> None:
        cid = j.candidate_id
        written = {_look_key(d.stage, d.details) for d in self.store.select(
            GateDecision, "experiment_id = ? AND candidate_id = ?", [self.id, cid])}
        *steps, closing = j.steps
        for s in steps:
            if s.stage not in ("select", "confirm") or _look_key(s.stage, s.numbers.get("details")) not in written:
                self.decision(cid, j.parent_id, s.stage, s.outcome, s.reason, rule, **s.numbers)
        booked = records.saved_booked(self.store, self.id, cid)
        if j.saved is not None and not booked:
            trials, usd, note = j.saved
            self.spend("saved", cid, note, usd, trials=trials)
        self.decision(cid, j.parent_id, closing.stage, closing.outcome, closing.reason, rule, **closing.numbers)
        self.set_status(cid, j.decision, j.reason)
        if closing.stage != "filter":
            self.set_checks(cid, j.check, j.liveness)

    def accepted_look(self, cid: str) -> Look | None:
        """The confirm look that accepted `cid` (its details hold the Look), or None."""
        rows = self.store.select(GateDecision, "experiment_id = ? AND candidate_id = ? AND stage = 'confirm' "
                                 "AND outcome = 'accept'", [self.id, cid])
        return Look.model_validate(rows[-1].details) if rows and rows[-1].details else None

    def spending(self, gate: SequentialRule) -> AlphaSpending:
        """The experiment's alpha state, from its confirm rows in candidate order; with candidates
        in flight at once (their confirmations have `begin` rows), in the order they began."""
        order = {c.candidate_id: c.iteration for c in self.candidates()}
        rows = self.store.select(GateDecision, "experiment_id = ? AND stage = 'confirm'", [self.id])
        begun = [d for d in rows if d.outcome == "begin"]
        if begun:
            rows = sorted(begun, key=lambda d: (d.decided_at, order.get(d.candidate_id, 1 << 30)))
        else:
            rows.sort(key=lambda d: (order.get(d.candidate_id, 1 << 30), d.decided_at))
        return AlphaSpending.from_rows([d.model_dump() for d in rows], alpha=gate.alpha, spend=gate.spend)

    def begin_confirmation(self, cid: str, parent_id: str | None, gate: SequentialRule, rule: str,
                           against: str | None = None) -> AlphaSpending:
        """Record that `cid`'s confirmation (against the head `against`, for a head-to-head one)
        begins, before any of its fresh trials run, and return the alpha state that gives it its j.
        A confirmation that already began (a resumed one) keeps its j and writes nothing."""
        with self.lock:
            s = self.spending(gate)
            key = confirmation_key(cid, against)
            if key in s.confirmed:
                return s
            s = s.begin(key)
            j = s.index(key)
            what = f"head-to-head against {against}" if against else "confirmation"
            self.decision(cid, parent_id, "confirm", "begin",
                          f"{what} begins: confirmation {j} of the experiment, alpha_j = {s.level(j):.4g}", rule,
                          details={"j": j, "alpha_j": s.level(j), **({"against": against} if against else {})})
            return s

    def head(self) -> str | None:
        """The accepted candidate whose acceptance was written last (None: nothing accepted yet).
        With one candidate at a time it is the latest accepted; with several in flight each
        acceptance beat the head before it (meta_agent.swarm), so it is the best shown so far."""
        accepted = {c.candidate_id for c in self.candidates() if c.status == "accepted"}
        rows = self.store.select(GateDecision, "experiment_id = ? AND stage = 'verdict' AND outcome = 'accept'", [self.id])
        rows = [d for d in rows if d.candidate_id in accepted]
        return max(rows, key=lambda d: d.decided_at).candidate_id if rows else None

    def decision(self, cid: str, parent_id: str | None, stage: Stage, outcome: str, reason: str, rule: str,
                 **numbers: Any) -> None:
        numbers.setdefault("alpha_spent", 0.0)  # only a confirmation's first look commits alpha
        self.store.insert(GateDecision(experiment_id=self.id, candidate_id=cid, parent_id=parent_id, stage=stage,
                                       outcome=outcome, reason=reason, rule=rule, decided_at=now(), **numbers))

    def spend(self, kind: SpendKind, cid: str | None, ref: str, usd: float | None, tokens_in: int = 0, tokens_out: int = 0,
              trials: int | None = None) -> None:
        self.store.insert(Spend(experiment_id=self.id, candidate_id=cid, kind=kind, ref=ref, usd=usd,
                                input_tokens=tokens_in, output_tokens=tokens_out, trials=trials, recorded_at=now()))

    def saved_trials(self) -> int:
        """Validation trials the staged gate's early stops did not run, over the experiment."""
        return records.saved_trials(self.store, self.id)

    def spent(self) -> dict[str, float]:
        out = {"task": 0.0, "meta": 0.0}
        out.update(records.spend_by_kind(self.store, self.id))
        return out

    def trials_run(self) -> int:
        return records.trial_count(self.store, self.id)

    def failing_trials(self, cid: str) -> list[str]:
        """Ids of `cid`'s train trials that did not pass, in task and attempt order."""
        return records.failing_train_trials(self.store, self.id, cid)

    def trials(self, cid: str, split: str) -> list[TrialResult]:
        return self.store.select(TrialResult, "experiment_id = ? AND candidate_id = ? AND split = ?",
                                 [self.id, cid, split])


def _look_key(stage: str, details: dict | None) -> tuple:
    """What identifies a gate row within a candidate's judgements: its stage, its look and, for a
    head-to-head confirmation, the head."""
    d = details or {}
    return stage, d.get("look"), d.get("against")


def diff(parent: Harness, child: Harness) -> str:
    """Unified diff of the two harnesses as YAML-like JSON lines (prompts line by line)."""
    def lines(h: Harness) -> list[str]:
        text = json.dumps(h.model_dump(mode="json", exclude_unset=True), indent=1, ensure_ascii=False)
        return text.replace("\\n", "\n").splitlines(keepends=False)

    return "\n".join(difflib.unified_diff(lines(parent), lines(child), "parent", "child", lineterm="", n=2))
