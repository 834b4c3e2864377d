"""The steps one candidate goes through, each written once, for the loop (meta_agent.swarm):

    pick       the parent the next proposal extends (or a merge of two frontier candidates)
    ask        the proposer's revision of it
    register   the ledger: the candidate, status `pending`, with its cost; the search's filter verdict
    judge      guard, then judge (meta_agent.judge, through the Evaluator) against its parent
    apply      the ledger: the judgement's rows; the candidate as decided; the search hears of it

`Steps` also holds the experiment's collaborators (ledger, evaluator, proposer, strategy, search,
guard) and what it remembers of each candidate (scores); meta_agent.optimize.Experiment adds the
baseline, the loop and the sealed test on top.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from metaopt.benchmarks.task import Task
from metaopt.meta_agent.canaries import canary_tasks, guarded
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.error_control import AlphaSpending
from metaopt.meta_agent.evaluator import Evaluator
from metaopt.meta_agent.gate import CandidateScores, NoiseFloor, Scores, mean
from metaopt.meta_agent.guard import Guard
from metaopt.meta_agent.guard.reviewer import Reviewer
from metaopt.meta_agent.judge import Judgement, Parent, failing_tasks, head_to_head, judge, refusal
from metaopt.meta_agent.ledger import Ledger
from metaopt.meta_agent.parts import Parts
from metaopt.meta_agent.proposers import Evidence, Revision, get_proposer
from metaopt.meta_agent.records import Candidate, CandidateView
from metaopt.meta_agent.search.strategies import get_strategy
from metaopt.meta_agent.search.strategies.hooks import NoSearch
from metaopt.meta_agent.search.view import SearchView
from metaopt.meta_agent.sequential import rule_text
from metaopt.task_agent.harness import Harness

Picked = tuple[Revision, CandidateView, str] | CandidateView
"""What the loop hands a proposal: a merge (revision, parent, "merge"), or the parent to propose from."""


class Steps:
    def __init__(self, cfg: RunConfig, experiment_id: str, tasks: list[Task], splits: dict[str, list[str]],
                 start: Harness | None, parts: Parts):
        """`tasks`: the benchmark's; `start`: the starting harness (None: a resume, whose baseline
        is recorded)."""
        self.cfg, self.id, self.splits, self.start, self.parts = cfg, experiment_id, splits, start, parts
        self.store, self.tracing, self.say = parts.store, parts.tracing, parts.on_event
        by_id = {t.id: t for t in tasks if isinstance(t, Task)}
        self.tasks = list(by_id.values())  # the benchmark's own (the cross-trace audit reads their expected values)
        canaries = canary_tasks(self.store, experiment_id, cfg, by_id)  # as recorded; never in a split: smoke runs only
        by_id.update({t.id: t for t in canaries})
        self.ledger = Ledger(self.store, experiment_id)
        self.evaluator = Evaluator(cfg, by_id, splits, self.ledger, canaries=[t.id for t in canaries],
                                   backend=parts.backend, tracing=parts.tracing, executor=parts.executor,
                                   on_trial=parts.on_trial)
        self.proposer = parts.proposer or get_proposer(cfg.meta_model)
        self.strategy = get_strategy(cfg.strategy)
        self.search: Any = NoSearch()  # the outer-loop seam (strategies/hooks.py); bound when the run starts
        reviewer = Reviewer(cfg.reviewer) if cfg.reviewer else None  # a model's reading, after the mechanical checks
        self.guard = Guard(guarded(tasks, canaries), reviewer=reviewer)  # not the canaries copied from a task: they repeat it
        self.scores: dict[str, CandidateScores] = {}
        self.rule = rule_text(cfg.gate, cfg.trials)

    def view(self) -> SearchView:
        """What a search strategy sees of this experiment (read-only)."""
        return SearchView(self.id, self.cfg, self.proposer, self.evaluator.backend, self.say, self.ledger, self.scores)

    def stop_reason(self, iteration: int, since_gain: int, best_val: float) -> str | None:
        c = self.cfg
        spent = self.ledger.spent()
        if iteration > c.max_iterations:
            return f"max iterations ({c.max_iterations}) reached"
        if c.budget_usd is not None and spent["task"] + spent["meta"] >= c.budget_usd:
            return f"budget spent (${spent['task'] + spent['meta']:.2f} of ${c.budget_usd:.2f})"
        if c.max_trials is not None and self.ledger.trials_run() + self.evaluator.in_flight >= c.max_trials:
            return f"max trials ({c.max_trials}) reached"
        if c.time_limit_s is not None and time.monotonic() - self.evaluator.t0 >= c.time_limit_s:
            return f"time limit ({c.time_limit_s:.0f} s) reached"
        if c.target_score is not None and best_val >= c.target_score:
            return f"target score {c.target_score} reached on validation"
        if since_gain >= c.plateau:
            return f"plateau: {since_gain} proposals in a row without an accepted gain"
        return None

    def interrupt(self) -> None:
        """End every trial in flight as Ctrl-C does (Evaluator.abort)."""
        self.evaluator.abort.set()

    def interrupted(self) -> bool:
        return self.evaluator.abort.is_set()

    # -- what the experiment remembers of a candidate ------------------------------------------
    def val(self, c: Candidate) -> Scores:
        s = self.scores.get(c.candidate_id)
        return s.validation if s else {}

    def view_of(self, c: Candidate) -> CandidateView:
        val = self.val(c)
        return CandidateView(candidate_id=c.candidate_id, parent_id=c.parent_id, iteration=c.iteration,
                             status=c.status, harness=c.harness, val_scores=val, val_mean=mean(val))

    def parent(self, p: Candidate, noise: NoiseFloor) -> Parent:
        """`p` as a parent: its train and validation record (run now if this run has not got it:
        a resumed experiment), the noise floor, the experiment's alpha state."""
        k, ev, pid = self.cfg.trials, self.evaluator, p.candidate_id
        if pid not in self.scores:
            train = ev.scores(pid, p.harness, "train", self.splits["train"], k)
            look = self.ledger.accepted_look(pid)  # a staged-gate winner is remembered by its confirmation
            val = (ev.scores(pid, p.harness, "validation", self.splits["validation"], k) if look is None
                   else ev.scores(pid, p.harness, "confirm", self.splits["validation"], look.child_trials))
            self.scores[pid] = CandidateScores(train=train, validation=val)
        s = self.scores[pid]
        return Parent(p, s, noise, self.ledger.spending(self.cfg.gate), failing_tasks(self.splits["train"], s.train))

    # -- the steps -----------------------------------------------------------------------------
    def pick(self, iteration: int, cands: list[Candidate], head: str, rng: random.Random, tried: set[str]) -> Picked:
        """Which parent proposal `iteration` extends (or a merge): greedy extends the head, any other
        strategy chooses from every candidate so far (`cands`, in iteration order)."""
        views = [self.view_of(c) for c in cands]
        self.search.begin(iteration, views)
        merged = self.strategy.merge(views, rng, tried) if iteration % 3 == 0 else None
        if merged:
            harness, parent_ids, why = merged  # GEPA-style: combine what two frontier candidates changed
            parent = max((v for v in views if v.candidate_id in parent_ids), key=lambda v: v.val_mean)
            return Revision(harness, why, cites=list(parent_ids)), parent, "merge"
        if self.strategy.name == "greedy":
            return next(v for v in views if v.candidate_id == head)
        return self.strategy.select(views, rng)

    def ask(self, parent: CandidateView, tried: set[str], slot: int = 0) -> Revision | str | None:
        """The proposer's revision of `parent`, or why the run stops, or None: no revision this time.
        `slot`: which of the proposals running at once this is (Evidence.slot)."""
        evidence = Evidence(self.store, self.ledger.failing_trials(parent.candidate_id), self.id,
                            parent_id=parent.candidate_id, allow_model_changes=self.cfg.allow_model_changes,
                            tracing=self.tracing, on_event=self.say, guidance=self.search.guidance(parent), slot=slot)
        name = self.proposer.name
        try:
            rev = self.proposer.propose(parent.harness, evidence, tried)
        except Exception as e:  # noqa: BLE001 - a meta-model API failure: stop cleanly; --resume can go on later
            return f"the {name} proposer failed: {type(e).__name__}: {e}"
        if rev is not None:
            return rev
        last = getattr(self.proposer, "last_run", {})
        if last.get("usd"):  # what a proposal that produced nothing cost still counts
            self.ledger.spend("meta", None, "proposal without a revision", last["usd"])
        if last.get("outcome") in ("max_turns", "stopped without a revision"):
            self.say(f"  the {name} proposer wrote no revision ({last['outcome']})")
            return None
        return f"the {name} proposer has nothing more to propose"

    def register(self, rev: Revision, parent: CandidateView, by: str, iteration: int,
                 tried: set[str]) -> tuple[Candidate, Any]:
        """Record a proposal as candidate c<iteration> (status pending) with its cost; returns it and
        the search's filter verdict (`drop`) for the judge."""
        cid = f"{self.id}/c{iteration}"
        tried.add(rev.harness.content_hash())
        drop = self.search.filter(rev, parent, cid)
        c = self.ledger.add_candidate(cid, rev.harness, iteration=iteration, status="pending",
                                      parent=parent.harness, parent_id=parent.candidate_id, proposer=by,
                                      rationale=rev.rationale, evidence=rev.cites,
                                      proposal_trace_id=rev.trace_id, predictions=rev.manifest,
                                      mechanisms=self.search.active())
        self.ledger.spend("meta", cid, "proposal", rev.usd)
        self.say(f"c{iteration}: {rev.rationale}")
        return c, drop

    def judge(self, c: Candidate, parent: Candidate, noise: NoiseFloor, drop: str | None = None,
              begin: Callable[[str], AlphaSpending] | None = None) -> Judgement:
        """Guard, then judge `c` against `parent` (`drop`: the search filter's verdict, refused
        before any trial; `begin`: Parent.begin). Runs trials, writes nothing."""
        problem = None if drop else self.guard.check(parent.harness, c.harness,
                                                     allow_model_changes=self.cfg.allow_model_changes)
        if drop:
            return refusal(c, "filter", "drop", f"dropped before any trial: {drop}")
        if problem:
            return refusal(c, "guard", "fail", f"invalid: {problem}")
        p = self.parent(parent, noise)
        return judge(c, p if begin is None else replace(p, begin=begin), self.evaluator)

    def head_to_head(self, c: Candidate, head: Candidate, noise: NoiseFloor) -> Judgement:
        """`c`, which passed against its parent, against `head`, a new confirmation begun now."""
        return head_to_head(c, self.parent(head, noise), self.evaluator, lambda: self.begin(c, against=head.candidate_id))

    def begin(self, c: Candidate, against: str | None = None) -> AlphaSpending:
        """Write that `c`'s confirmation (against its parent, or head to head `against`) begins now."""
        return self.ledger.begin_confirmation(c.candidate_id, c.parent_id, self.cfg.gate, self.rule, against=against)

    def record(self, j: Judgement, tag: str = "") -> None:
        """Write `j`'s rows and say them (`tag`: which candidate, when several are in flight)."""
        self.ledger.record(j, self.rule)
        for line in j.lines():
            self.say(f"  {tag}:{line[1:]}" if tag else line)

    def apply(self, c: Candidate, j: Judgement, tag: str = "") -> Candidate:
        """Record the final judgement `j` of `c`; returns `c` as decided (the search hears of it)."""
        self.record(j, tag)
        if j.scores is not None:
            self.scores[c.candidate_id] = j.scores
        c = j.applied(c) if j.stage != "filter" else c.model_copy(update={"status": j.decision,
                                                                         "status_reason": j.reason})
        self.search.on_result(c)
        return c
