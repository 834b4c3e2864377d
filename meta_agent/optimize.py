"""`metaopt run`: propose, validate, screen, gate; evaluate the sealed test split once at the end.

    baseline x K on train + validation (measures the noise floor)
    repeat: parent = strategy.select(); revision = proposer.propose(parent, its failing train trials)
            invalid?  (schema, diff guard, 1-task smoke run)       -> status invalid
            screen    (child on the train tasks the parent failed) -> rejected on fail
            validate  (child x K on validation; paired gate)       -> accepted | rejected | inconclusive
    test: baseline and best, x K, once

Every trial is keyed by (experiment, candidate, split, task, attempt) through a deterministic run
id, so a resumed experiment re-runs nothing that finished; every decision is a ledger row written
first. Starting and resuming an experiment live in meta_agent.experiment.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable

from benchmarks.task import Task
from evaluation import HarnessAgent, TrialResult, run_eval
from evaluation.runner import Executor
from meta_agent.config import RunConfig
from meta_agent.gate import NoiseFloor, Scores, confidence_interval, decide, rule_text, screen
from meta_agent.guard import Guard
from meta_agent.ledger import Ledger
from meta_agent.plot import write_progress_png
from meta_agent.proposers import Evidence, Revision, get_proposer
from meta_agent.records import Candidate, CandidateScores, CandidateView
from meta_agent.strategies import get_strategy
from task_agent.harness import Harness
from traces.store import Store


def preflight(splits: dict[str, list[str]], k: int) -> dict[str, int]:
    """Trial counts an experiment commits to: the baseline, each iteration at most, the test."""
    n_fit = len(splits["train"]) + len(splits["validation"])
    return {"baseline": n_fit * k, "per_iteration": 1 + n_fit * k, "test": 2 * len(splits["test"]) * k}


class Experiment:
    def __init__(self, cfg: RunConfig, tasks: list[Task], splits: dict[str, list[str]], start: Harness | None, *,
                 store: Store, backend: Any, tracing: Any, experiment_id: str,
                 on_event: Callable[[str], None] = lambda line: None,
                 on_trial: Callable[[TrialResult], None] = lambda r: None,
                 executor: Executor | None = None):
        self.cfg, self.store, self.backend, self.tracing, self.say = cfg, store, backend, tracing, on_event
        self.on_trial, self.executor = on_trial, executor
        self.tasks = {t.id: t for t in tasks if isinstance(t, Task)}
        self.splits, self.start, self.id = splits, start, experiment_id
        self.ledger = Ledger(store, experiment_id)
        self.proposer = get_proposer(cfg.meta_model)
        self.strategy = get_strategy(cfg.strategy)
        self.guard = Guard(list(self.tasks.values()))
        self.scores: dict[str, CandidateScores] = {}
        self.t0 = time.monotonic()

    # -- evaluation ------------------------------------------------------------------------
    def evaluate(self, cid: str, harness: Harness, split: str, task_ids: list[str], k: int
                 ) -> tuple[Scores, list[TrialResult]]:
        agent = HarnessAgent(harness, self.cfg.model, base_url=self.cfg.base_url, tracing=self.tracing)
        result = run_eval([self.tasks[t] for t in task_ids], agent, benchmark=self.cfg.benchmark,
                          backend=self.backend, store=self.store, trials=k, concurrency=self.cfg.concurrency,
                          run_id=f"{cid}:{split}", dataset=self.cfg.dataset, executor=self.executor,
                          extra={"experiment_id": self.id, "candidate_id": cid, "split": split},
                          on_trial=lambda r: self._booked(cid, r))
        scores: Scores = {t: [None] * k for t in task_ids}
        for r in result.rows:
            scores[r.task_id][r.attempt] = r.score
        return scores, result.rows

    def _booked(self, cid: str, r: TrialResult) -> None:
        self.ledger.spend("task", cid, r.trial_id, r.cost_usd, r.input_tokens or 0, r.output_tokens or 0)
        self.on_trial(r)

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

    def _run(self) -> dict[str, Any]:
        rng = random.Random(self.cfg.seed)
        rule = rule_text(self.cfg.gate)
        k, train, val = self.cfg.trials, self.splits["train"], self.splits["validation"]
        cands = self.ledger.candidates()
        if not cands:
            self.ledger.add_candidate(f"{self.id}/c0", self.start, iteration=0, status="baseline")
            cands = self.ledger.candidates()
        base = cands[0]
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
                since_gain = 0 if c.status == "accepted" else since_gain
        while True:
            best_val = _mean(self._val(self._incumbent(cands).candidate_id))
            stop = self.stop_reason(iteration, since_gain, best_val)
            if stop:
                break
            views = [self._view(c) for c in cands]
            merged = self.strategy.merge(views, rng, tried) if iteration % 3 == 0 else None
            if merged:
                harness, parent_ids, why = merged  # GEPA-style: combine what two frontier candidates changed
                parent = max((v for v in views if v.candidate_id in parent_ids), key=lambda v: v.val_mean)
                rev, by = Revision(harness, why, cites=list(parent_ids)), "merge"
            else:
                parent = self.strategy.select(views, rng)
                failing_ids = [r["trial_id"] for r in self.store.rows(
                    "SELECT trial_id FROM trials WHERE experiment_id = ? AND candidate_id = ? AND split = 'train' "
                    "AND (score IS NULL OR score < 1)", [self.id, parent.candidate_id])]
                try:
                    rev = self.proposer.propose(parent.harness, Evidence(self.store, failing_ids, self.id), tried)
                except Exception as e:  # a meta-model API failure: stop cleanly; --resume can go on later
                    stop = f"the {self.proposer.name} proposer failed: {type(e).__name__}: {e}"
                    break
                by = self.proposer.name
            if rev is None:
                unbooked = getattr(self.proposer, "last_run", {}).get("usd")
                if unbooked:  # what a proposal that produced nothing cost still counts
                    self.ledger.spend("meta", None, "proposal without a revision", unbooked)
                stop = f"the {self.proposer.name} proposer has nothing more to propose"
                break
            p_train = self.scores[parent.candidate_id].train
            failing = [t for t in train if _mean({t: p_train[t]}) < 1.0]
            cid = f"{self.id}/c{iteration}"
            tried.add(rev.harness.content_hash())
            c = self.ledger.add_candidate(cid, rev.harness, iteration=iteration, status="pending",
                                          parent=parent.harness, parent_id=parent.candidate_id, proposer=by,
                                          rationale=rev.rationale, evidence=rev.cites)
            self.ledger.spend("meta", cid, "proposal", rev.usd)
            self.say(f"c{iteration}: {rev.rationale}")
            cands.append(c)
            cands[-1] = c = self._judge(c, cands, noise, rule, k, failing)
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
        per_iter = preflight(self.splits, k)["per_iteration"]
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
        parent = next(p for p in cands if p.candidate_id == pid)
        if pid not in self.scores:
            self.scores[pid] = CandidateScores(
                train=self.evaluate(pid, parent.harness, "train", self.splits["train"], k)[0],
                validation=self.evaluate(pid, parent.harness, "validation", self.splits["validation"], k)[0])
        p_train, p_val = self.scores[pid].train, self.scores[pid].validation
        failing = failing or [t for t, s in p_train.items() if _mean({t: s}) < 1.0]

        def verdict(status: str, stage: str, outcome: str, reason: str, **numbers: Any) -> Candidate:
            self.ledger.decision(cid, pid, stage, outcome, reason, rule, **numbers)
            self.ledger.set_status(cid, status, reason)
            self.say(f"  {stage}: {reason}")
            return c.model_copy(update={"status": status, "status_reason": reason})

        problem = self.guard.check(parent.harness, c.harness, allow_model_changes=self.cfg.allow_model_changes)
        if problem:
            return verdict("invalid", "guard", "fail", f"invalid: {problem}")
        smoke_task = (failing or self.splits["train"])[:1]
        _, rows = self.evaluate(cid, c.harness, "smoke", smoke_task, 1)
        if all(r.status == "error" for r in rows):
            return verdict("invalid", "smoke", "fail", f"invalid: smoke run errored: {rows[0].error}")
        c_train, _ = self.evaluate(cid, c.harness, "train", failing, k) if failing else ({}, [])
        s = screen(p_train, c_train, failing)
        self.ledger.decision(cid, pid, "screen", s.outcome, s.reason, rule, n_tasks=s.n_tasks,
                             delta=s.child_mean - s.parent_mean, details=s.per_task)
        self.say(f"  screen: {s.reason}")
        if s.outcome == "fail":
            return verdict("rejected", "screen", "fail", s.reason)
        c_val, _ = self.evaluate(cid, c.harness, "validation", self.splits["validation"], k)
        d = decide(p_val, c_val, noise, self.cfg.gate)
        status = {"accept": "accepted", "reject": "rejected", "inconclusive": "inconclusive"}[d.outcome]
        if status == "accepted":  # it becomes a parent: its full train picture feeds the proposer
            c_train = self.evaluate(cid, c.harness, "train", self.splits["train"], k)[0]
        self.scores[cid] = CandidateScores(train=c_train, validation=c_val)
        return verdict(status, "validation", d.outcome, d.reason, delta=d.delta, se=d.se, threshold=d.threshold,
                       n_tasks=d.n_tasks, coverage=d.coverage, details=d.model_dump(mode="json"))

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
            "spend": spent, "stop_reason": stop,
            "candidates": [{"id": c.candidate_id, "status": c.status, "parent": c.parent_id,
                            "rationale": c.rationale, "val_mean": val_mean(c)} for c in cands],
        }
        png = self.store.path.parent / self.id / "progress.png"
        png.parent.mkdir(parents=True, exist_ok=True)
        write_progress_png([{"iteration": c.iteration, "status": c.status, "score": val_mean(c)} for c in cands],
                           png, title=f"{self.cfg.benchmark} / {self.cfg.model}: {len(cands)} candidates")
        result["progress_png"] = str(png)
        self.ledger.finish("finished", result)
        return result


def _mean(scores: Scores) -> float:
    """Mean over tasks of the per-task mean of scored trials (errors excluded); 0 when none."""
    per = [sum(s) / len(s) for s in ([x for x in v if x is not None] for v in scores.values()) if s]
    return sum(per) / len(per) if per else 0.0
