"""`metaopt run`: propose, validate, screen, gate; evaluate the sealed test split once at the end.

    baseline x K on train + validation (measures the noise floor)
    repeat: parent = strategy.select(); revision = proposer.propose(parent, its failing train trials)
            invalid?  (schema, diff guard incl. verifier-path lint, 1-task smoke run + canaries,
                       any tampered trial at any stage)            -> status invalid
            screen    (child on the train tasks the parent failed, plus the passing ones its
                       manifest promises to keep)                  -> rejected on fail
            validate  (staged gate, meta_agent.staged: select on the reused validation trials with
                       early stops, confirm on fresh trials at the experiment's alpha_j)
                                                                   -> accepted | rejected | inconclusive
            verdict   (one closing row: the gate's outcome, the manifest's claim checked against the
                       train results, liveness: a change that never ran is inconclusive)
    test: baseline and best, x K, once

Every trial is keyed by (experiment, candidate, split, task, attempt) through a deterministic run
id, so a resumed experiment re-runs nothing that finished; every decision is a ledger row written
first. Starting and resuming an experiment live in meta_agent.experiment.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from typing import Any

from metaopt.benchmarks.canary import canary_tasks, is_canary
from metaopt.benchmarks.task import Task
from metaopt.core.errors import CandidateRefused
from metaopt.evaluation import HarnessAgent, TrialResult, run_eval
from metaopt.evaluation.runner import Executor
from metaopt.meta_agent import memory, staged
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.gate import NoiseFloor, Scores, confidence_interval, screen
from metaopt.meta_agent.guard import Guard
from metaopt.meta_agent.ledger import Ledger
from metaopt.meta_agent.liveness import Liveness
from metaopt.meta_agent.plot import write_progress_png
from metaopt.meta_agent.proposers import Evidence, Revision, get_proposer
from metaopt.meta_agent.records import Candidate, CandidateScores, CandidateView, Stage
from metaopt.meta_agent.search.strategies import get_strategy
from metaopt.meta_agent.search.strategies.hooks import NoSearch, bind_search
from metaopt.meta_agent.sequential import rule_text
from metaopt.meta_agent.staged import preflight
from metaopt.task_agent.harness import Harness
from metaopt.traces.store import Store


class Experiment:
    def __init__(self, cfg: RunConfig, tasks: list[Task], splits: dict[str, list[str]], start: Harness | None, *,
                 store: Store, backend: Any, tracing: Any, experiment_id: str,
                 on_event: Callable[[str], None] = lambda line: None,
                 on_trial: Callable[[TrialResult], None] = lambda r: None,
                 executor: Executor | None = None):
        self.cfg, self.store, self.backend, self.tracing, self.say = cfg, store, backend, tracing, on_event
        self.on_trial, self.executor = on_trial, executor
        self.tasks = {t.id: t for t in tasks if isinstance(t, Task)}
        canaries = canary_tasks(cfg.benchmark) if cfg.canary else []
        self.canaries = [t.id for t in canaries]  # never in a split: smoke runs only
        self.tasks.update({t.id: t for t in canaries})
        self.splits, self.start, self.id = splits, start, experiment_id
        self.ledger = Ledger(store, experiment_id)
        self.proposer = get_proposer(cfg.meta_model)
        self.strategy = get_strategy(cfg.strategy)
        self.search: Any = NoSearch()  # the outer-loop seam (strategies/hooks.py); bound when the run starts
        self.guard = Guard(list(self.tasks.values()))
        self.scores: dict[str, CandidateScores] = {}
        self._watch: dict[str, Scores] = {}  # child id -> its parent's validation scores, while it is judged
        self.t0 = time.monotonic()

    # -- evaluation ------------------------------------------------------------------------
    def evaluate(self, cid: str, harness: Harness, split: str, task_ids: list[str], k: int
                 ) -> tuple[Scores, list[TrialResult]]:
        agent = HarnessAgent(harness, self.cfg.model, base_url=self.cfg.base_url, tracing=self.tracing)
        flying = [0]  # trials this run submitted that have not come back: the trial-count stop counts them

        def stop() -> str | None:
            if (why := self._spent_stop(flying[0])) is None:
                flying[0] += 1  # run_eval submits one trial after each None
            return why

        def booked(r: TrialResult) -> None:
            flying[0] -= 1
            self._booked(cid, r)

        result = run_eval([self.tasks[t] for t in task_ids], agent, benchmark=self.cfg.benchmark,
                          backend=self.backend, store=self.store, trials=k, concurrency=self.cfg.concurrency,
                          run_id=f"{cid}:{split}", dataset=self.cfg.dataset, executor=self.executor,
                          extra={"experiment_id": self.id, "candidate_id": cid, "split": split}, on_trial=booked,
                          stop=None if split == "test" else stop)  # the sealed test always runs whole
        scores: Scores = {t: [None] * k for t in task_ids}
        for r in result.rows:  # the run may hold more (other tasks, later attempts): a later stage ran them
            if r.task_id in scores and r.attempt < k:
                scores[r.task_id][r.attempt] = r.score
        if cid in self._watch and split in ("validation", "confirm"):  # a child inside the staged gate
            if bad := _refused(result.rows):
                raise CandidateRefused(bad)
            scores = _charged(self._watch[cid], scores)
        return scores, result.rows

    def _booked(self, cid: str, r: TrialResult) -> None:
        self.ledger.spend("task", cid, r.trial_id, r.cost_usd, r.input_tokens or 0, r.output_tokens or 0)
        self.on_trial(r)

    def _spent_stop(self, in_flight: int = 0) -> str | None:
        """The trial-count and budget stops, asked before each trial is submitted. The trial count
        includes the `in_flight` trials, so it stops at exactly max_trials submitted, whichever
        finish first (a run is repeatable); the budget stop overshoots by the trials in flight
        (each booked in the ledger: their cost is known only when they end), never more."""
        c = self.cfg
        if c.max_trials is not None and self.ledger.trials_run() + in_flight >= c.max_trials:
            return f"max trials ({c.max_trials}) reached"
        spent = self.ledger.spent()
        if c.budget_usd is not None and spent["task"] + spent["meta"] >= c.budget_usd:
            return "budget spent"
        return None

    def stop_reason(self, iteration: int, since_gain: int, best_val: float) -> str | None:
        c = self.cfg
        spent = self.ledger.spent()
        if iteration > c.max_iterations:
            return f"max iterations ({c.max_iterations}) reached"
        if c.budget_usd is not None and spent["task"] + spent["meta"] >= c.budget_usd:
            return f"budget spent (${spent['task'] + spent['meta']:.2f} of ${c.budget_usd:.2f})"
        if c.max_trials is not None and self.ledger.trials_run() >= c.max_trials:
            return f"max trials ({c.max_trials}) reached"
        if c.time_limit_s is not None and time.monotonic() - self.t0 >= c.time_limit_s:
            return f"time limit ({c.time_limit_s:.0f} s) reached"
        if c.target_score is not None and best_val >= c.target_score:
            return f"target score {c.target_score} reached on validation"
        if since_gain >= c.plateau:
            return f"plateau: {since_gain} proposals in a row without an accepted gain"
        return None

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run (or finish) the experiment and return its report. On interruption the experiment
        is marked `interrupted` (resumable) before the exception propagates."""
        try:
            return self._run()
        except BaseException:
            self.ledger.finish("interrupted")
            raise
        finally:
            self.search.close()

    def _run(self) -> dict[str, Any]:
        rng = random.Random(self.cfg.seed)
        k, train, val = self.cfg.trials, self.splits["train"], self.splits["validation"]
        rule = rule_text(self.cfg.gate, k)
        cands = self.ledger.candidates()
        if not cands:
            if self.start is None:  # a resume always finds its baseline recorded
                raise ValueError(f"{self.id}: no candidate recorded and no starting harness given")
            self.ledger.add_candidate(f"{self.id}/c0", self.start, iteration=0, status="baseline")
            cands = self.ledger.candidates()
        base = cands[0]
        self.search = bind_search(self.strategy, self)
        self.say(f"baseline: {len(train) + len(val)} tasks x {k} trials")
        self.scores[base.candidate_id] = CandidateScores(
            train=self.evaluate(base.candidate_id, base.harness, "train", train, k)[0],
            validation=self.evaluate(base.candidate_id, base.harness, "validation", val, k)[0])
        noise = NoiseFloor.measure(self.scores[base.candidate_id].validation)
        self._estimate(k)
        tried = {c.harness_hash for c in cands}
        since_gain, iteration, stop = 0, len(cands), None
        for i, c in enumerate(cands[1:], start=1):  # resume: replay what was decided, finish what was not
            since_gain = 0 if c.status == "accepted" else since_gain + 1
            if c.status == "pending":
                cands[i] = c = self._judge(c, cands, noise, rule, k)
                self.search.on_result(c)
                since_gain = 0 if c.status == "accepted" else since_gain
        while True:
            best_val = _mean(self._val(self._incumbent(cands).candidate_id))
            stop = self.stop_reason(iteration, since_gain, best_val)
            if stop:
                break
            views = [self._view(c) for c in cands]
            self.search.begin(iteration, views)
            merged = self.strategy.merge(views, rng, tried) if iteration % 3 == 0 else None
            if merged:
                harness, parent_ids, why = merged  # GEPA-style: combine what two frontier candidates changed
                parent = max((v for v in views if v.candidate_id in parent_ids), key=lambda v: v.val_mean)
                rev, by = Revision(harness, why, cites=list(parent_ids)), "merge"
            else:
                parent = self.strategy.select(views, rng)
                failing_ids = [r["trial_id"] for r in self.store.rows(
                    "SELECT trial_id FROM trials WHERE experiment_id = ? AND candidate_id = ? AND split = 'train' "
                    "AND (score IS NULL OR score < 1) ORDER BY task_id, attempt", [self.id, parent.candidate_id])]
                evidence = Evidence(self.store, failing_ids, self.id, parent_id=parent.candidate_id,
                                    allow_model_changes=self.cfg.allow_model_changes, tracing=self.tracing,
                                    on_event=self.say, guidance=self.search.guidance(parent))
                try:
                    rev = self.proposer.propose(parent.harness, evidence, tried)
                except Exception as e:  # noqa: BLE001 - a meta-model API failure: stop cleanly; --resume can go on later
                    stop = f"the {self.proposer.name} proposer failed: {type(e).__name__}: {e}"
                    break
                by = self.proposer.name
            if rev is None:
                last = getattr(self.proposer, "last_run", {})
                if last.get("usd"):  # what a proposal that produced nothing cost still counts
                    self.ledger.spend("meta", None, "proposal without a revision", last["usd"])
                if last.get("outcome") in ("max_turns", "stopped without a revision"):
                    since_gain += 1  # a meta-agent session that wrote nothing: try again, up to the plateau
                    self.say(f"  the {self.proposer.name} proposer wrote no revision ({last['outcome']})")
                    continue
                stop = f"the {self.proposer.name} proposer has nothing more to propose"
                break
            p_train = self.scores[parent.candidate_id].train
            failing = [t for t in train if _mean({t: p_train[t]}) < 1.0]
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
            cands.append(c)
            cands[-1] = c = self._drop(c, drop, rule) if drop else self._judge(c, cands, noise, rule, k, failing)
            self.search.on_result(c)
            since_gain = 0 if c.status == "accepted" else since_gain + 1
            iteration += 1
        return self._finish(base, cands, k, stop or "")

    def _val(self, cid: str) -> Scores:
        s = self.scores.get(cid)
        return s.validation if s else {}

    def _view(self, c: Candidate) -> CandidateView:
        val = self._val(c.candidate_id)
        return CandidateView(candidate_id=c.candidate_id, parent_id=c.parent_id, iteration=c.iteration,
                             status=c.status, harness=c.harness, val_scores=val, val_mean=_mean(val))

    def _estimate(self, k: int) -> None:
        """What the budget buys, priced from the baseline's own trials."""
        n = self.ledger.trials_run()
        per_trial = self.ledger.spent()["task"] / n if n else 0.0
        per_iter = preflight(self.splits, k, self.cfg.gate)["per_iteration"]
        line = f"baseline: {n} trials, ${per_trial:.4f} per trial; an iteration runs up to {per_iter} trials"
        if self.cfg.budget_usd is not None and per_trial > 0:
            line += f" (${per_iter * per_trial:.2f}): the budget buys about {int(self.cfg.budget_usd / (per_iter * per_trial))} iterations"
        self.say(line)

    def _incumbent(self, cands: list[Candidate]) -> Candidate:
        return [c for c in cands if c.status in ("baseline", "accepted")][-1]

    def _judge(self, c: Candidate, cands: list[Candidate], noise: NoiseFloor, rule: str, k: int,
               failing: list[str] | None = None) -> Candidate:
        """Guard, smoke, screen and validate `c`; record every step. Returns `c` with its status."""
        cid, pid = c.candidate_id, c.parent_id
        if pid is None:
            raise ValueError(f"{cid}: the baseline has no parent to be judged against")
        parent = next(p for p in cands if p.candidate_id == pid)
        if pid not in self.scores:
            self.scores[pid] = CandidateScores(
                train=self.evaluate(pid, parent.harness, "train", self.splits["train"], k)[0],
                validation=staged.record(self, parent, k))
        p_train, p_val = self.scores[pid].train, self.scores[pid].validation
        failing = failing or [t for t, s in p_train.items() if _mean({t: s}) < 1.0]

        def verdict(status: str, stage: Stage, outcome: str, reason: str, live: Liveness | None = None,
                    c_train: Scores | None = None, **numbers: Any) -> Candidate:
            check = memory.claim(c.predictions, p_train, c_train) if c_train is not None else None
            if check:  # the gate row says whether the edit did what it claimed
                reason += f"; claim: {check.summary}"
            if live is not None:
                status, reason = memory.judged(status, reason, live)
            self.ledger.decision(cid, pid, stage, outcome, reason, rule, **numbers)
            self.ledger.set_status(cid, status, reason)
            self.ledger.set_checks(cid, check, live)
            self.say(f"  {stage}: {reason}")
            return c.model_copy(update={"status": status, "status_reason": reason, "prediction_check": check,
                                        "liveness": live})

        problem = self.guard.check(parent.harness, c.harness, allow_model_changes=self.cfg.allow_model_changes)
        if problem:
            return verdict("invalid", "guard", "fail", f"invalid: {problem}")
        smoke_task = (failing or self.splits["train"])[:1]
        _, rows = self.evaluate(cid, c.harness, "smoke", smoke_task + self.canaries, 1)
        if bad := _refused(rows):
            return verdict("invalid", "smoke", "fail", f"invalid: {bad}")
        if all(r.status == "error" for r in rows if not is_canary(r.task_id)):
            return verdict("invalid", "smoke", "fail",
                           f"invalid: smoke run errored: {next(r for r in rows if not is_canary(r.task_id)).error}")
        run = memory.screen_tasks(failing, c.predictions)  # + the manifest's keeps, so they can be checked
        c_train, train_rows = self.evaluate(cid, c.harness, "train", run, k) if run else ({}, [])
        if bad := _refused(train_rows):
            return verdict("invalid", "screen", "fail", f"invalid: {bad}")
        c_train = _charged(p_train, c_train)
        s = screen(p_train, c_train, failing)
        if s.outcome == "fail":
            live = memory.liveness(self.ledger, parent.harness, c.harness, pid, cid, "train")
            return verdict("rejected", "screen", "fail", s.reason, live, c_train, n_tasks=s.n_tasks,
                           delta=s.child_mean - s.parent_mean, details=s.per_task)
        self.ledger.decision(cid, pid, "screen", s.outcome, s.reason, rule, n_tasks=s.n_tasks,
                             delta=s.child_mean - s.parent_mean, details=s.per_task)
        self.say(f"  screen: {s.reason}")
        self._watch[cid] = p_val  # its validation and confirm trials: tampered -> invalid, errors charged
        try:
            v, c_val = staged.judge(self, c, parent, p_val, noise, k, rule)  # writes one row per look
        except CandidateRefused as e:
            return verdict("invalid", "validation", "fail", f"invalid: {e}")
        finally:
            self._watch.pop(cid, None)
        status = {"accept": "accepted", "reject": "rejected", "inconclusive": "inconclusive"}[v.outcome]
        if status == "accepted":  # it becomes a parent: its full train picture feeds the proposer
            c_train = _charged(p_train, self.evaluate(cid, c.harness, "train", self.splits["train"], k)[0])
        live = memory.liveness(self.ledger, parent.harness, c.harness, pid, cid, "validation")
        self.scores[cid] = CandidateScores(train=c_train, validation=c_val)
        last = v.looks[-1]  # the verdict row: the staged outcome, what the claim check found, liveness
        return verdict(status, "verdict", v.outcome, v.reason, live, c_train, delta=last.delta, se=last.se,
                       threshold=last.threshold, n_tasks=last.n_tasks, coverage=last.coverage,
                       details={"looks": len(v.looks), "trials_run": v.trials_run, "trials_max": v.trials_max})

    def _drop(self, c: Candidate, reason: str, rule: str) -> Candidate:
        """A revision a search mechanism dropped before any trial (strategy bilevel)."""
        why = f"dropped before any trial: {reason}"
        self.ledger.decision(c.candidate_id, c.parent_id, "filter", "drop", why, rule)
        self.ledger.set_status(c.candidate_id, "invalid", why)
        self.say(f"  filter: {why}")
        return c.model_copy(update={"status": "invalid", "status_reason": why})

    def _finish(self, base: Candidate, cands: list[Candidate], k: int, stop: str) -> dict[str, Any]:
        best = self._incumbent(cands)
        test = self.splits["test"]
        self.say(f"stopped: {stop}. Sealed test split: {len(test)} tasks x {k}, baseline and best")
        base_test, _ = self.evaluate(base.candidate_id, base.harness, "test", test, k)
        best_test = (base_test if best.candidate_id == base.candidate_id
                     else self.evaluate(best.candidate_id, best.harness, "test", test, k)[0])
        spent = self.ledger.spent()
        bm, bl, bh = confidence_interval(base_test)
        tm, tl, th = confidence_interval(best_test)
        accepted = [c for c in cands if c.status == "accepted"]

        def val_mean(c: Candidate) -> float | None:
            return _mean(self._val(c.candidate_id)) if c.candidate_id in self.scores else None

        result = {
            "experiment_id": self.id, "baseline_test_score": bm, "baseline_test_ci": [bl, bh],
            "best_test_score": tm, "best_test_ci": [tl, th], "best_candidate": best.candidate_id,
            "iterations": len(cands) - 1, "accepted": len(accepted), "spend_usd": spent["task"] + spent["meta"],
            "spend": spent, "stop_reason": stop, "validation_trials_saved": self.ledger.saved_trials(),
            "best_validation_gain": staged.gain_report(self, best),
            "alpha_committed": staged.spending(self).spent, "alpha": self.cfg.gate.alpha,
            "candidates": [{"id": c.candidate_id, "status": c.status, "parent": c.parent_id,
                            "rationale": c.rationale, "val_mean": val_mean(c),
                            "proposal_trace_id": c.proposal_trace_id,
                            **{k: (v.model_dump(mode="json") if v is not None else None) for k, v in (
                                ("predictions", c.predictions), ("prediction_check", c.prediction_check),
                                ("liveness", c.liveness))}} for c in cands],
        }
        png = self.store.path.parent / self.id / "progress.png"
        png.parent.mkdir(parents=True, exist_ok=True)
        write_progress_png([{"iteration": c.iteration, "status": c.status, "score": val_mean(c)} for c in cands],
                           png, title=f"{self.cfg.benchmark} / {self.cfg.model}: {len(cands)} candidates")
        result["progress_png"] = str(png)
        if summary := self.search.finish():
            result["bilevel"] = summary
        self.ledger.finish("finished", result)
        return result


def _refused(rows: list[TrialResult]) -> str | None:
    """Why a candidate's trials make it invalid: any tampered trial, any canary it passed."""
    for r in rows:
        if r.status == "tampered":
            return f"a trial was tampered with ({_task_hint(r.task_id)}): {r.error}"
    for r in rows:
        if is_canary(r.task_id) and (r.score or 0) > 0:
            return f"passed the canary task {r.task_id}, which only tampering with the verifier can pass"
    return None


def _task_hint(task_id: str) -> str:
    return task_id if is_canary(task_id) else f"task #{hashlib.sha1(task_id.encode()).hexdigest()[:6]}"


def _charged(parent: Scores, child: Scores) -> Scores:
    """The child's scores with its errored trials counted as failures (0) on every task where the
    parent had no error: an error the child brought is the child's failure, not missing data."""
    return {t: [0.0 if x is None and parent.get(t) and None not in parent[t] else x for x in trials]
            for t, trials in child.items()}


def _mean(scores: Scores) -> float:
    """Mean over tasks of the per-task mean of scored trials (errors excluded); 0 when none."""
    per = [sum(s) / len(s) for s in ([x for x in v if x is not None] for v in scores.values()) if s]
    return sum(per) / len(per) if per else 0.0
