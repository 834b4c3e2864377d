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

The loop is meta_agent.swarm (one loop: `--parallel N` candidates in flight, one slot by default);
each step a candidate goes through (pick, ask, register, judge: guard then meta_agent.judge through
the Evaluator, apply: the ledger, the only writer of decisions) is written once, in
meta_agent.steps. The baseline's train and validation, the test's baseline and best, run at once at
--parallel N > 1 (swarm.at_once). Every trial is keyed by (experiment, candidate, split, task,
attempt) through a deterministic run id, so a resumed experiment re-runs nothing that finished.
Starting and resuming an experiment live in meta_agent.experiment.
"""

from __future__ import annotations

import random
from dataclasses import asdict
from typing import Any

from metaopt.meta_agent.gate import CandidateScores, NoiseFloor, confidence_interval, mean
from metaopt.meta_agent.guard.audit import audit
from metaopt.meta_agent.plot import write_progress_png
from metaopt.meta_agent.records import Candidate
from metaopt.meta_agent.report import CandidateReport, RunReport
from metaopt.meta_agent.search.strategies.hooks import bind_search
from metaopt.meta_agent.staged import preflight
from metaopt.meta_agent.steps import Steps
from metaopt.meta_agent.swarm import at_once, run_loop


class Experiment(Steps):
    """One experiment: the baseline, the loop (meta_agent.swarm, over the steps of
    meta_agent.steps.Steps), the sealed test. Built by meta_agent.experiment (start, resume)."""

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> RunReport:
        """Run (or finish) the experiment and return its report. On interruption the experiment
        is marked `interrupted` (resumable) before the exception propagates."""
        try:
            return self._run()
        except BaseException:
            self.ledger.finish("interrupted")
            raise
        finally:
            self.search.close()

    def _run(self) -> RunReport:
        rng = random.Random(self.cfg.seed)
        cands, noise = self._baseline()
        tried = {c.harness_hash for c in cands}
        cands, stop, head = run_loop(self, cands, noise, rng, tried)
        return self._finish(cands, stop, head)

    # -- before and after the loop -------------------------------------------------------------------------
    def _baseline(self) -> tuple[list[Candidate], NoiseFloor]:
        """The candidates so far (the baseline recorded first), with the baseline measured K times."""
        k, ev = self.cfg.trials, self.evaluator
        cands = self.ledger.candidates()
        if not cands:
            if self.start is None:  # a resume always finds its baseline recorded
                raise ValueError(f"{self.id}: no candidate recorded and no starting harness given")
            self.ledger.add_candidate(f"{self.id}/c0", self.start, iteration=0, status="baseline")
            cands = self.ledger.candidates()
        base = cands[0]
        self.search = bind_search(self.strategy, self.view())
        train, val = self.splits["train"], self.splits["validation"]
        self.say(f"baseline: {len(train) + len(val)} tasks x {k} trials")
        train_scores, val_scores = at_once(self, lambda: ev.scores(base.candidate_id, base.harness, "train", train, k),
                                           lambda: ev.scores(base.candidate_id, base.harness, "validation", val, k))
        self.scores[base.candidate_id] = CandidateScores(train=train_scores, validation=val_scores)
        noise = NoiseFloor.measure(self.scores[base.candidate_id].validation)
        self._estimate(k)
        return cands, noise

    def _estimate(self, k: int) -> None:
        """What the budget buys, priced from the baseline's own trials."""
        n = self.ledger.trials_run()
        per_trial = self.evaluator.price_per_trial()
        per_iter = preflight(self.splits, k, self.cfg.gate)["per_iteration"]
        line = f"baseline: {n} trials, ${per_trial:.4f} per trial; an iteration runs up to {per_iter} trials"
        if self.cfg.budget_usd is not None and per_trial > 0:
            line += f" (${per_iter * per_trial:.2f}): the budget buys about {int(self.cfg.budget_usd / (per_iter * per_trial))} iterations"
        self.say(line)

    def _finish(self, cands: list[Candidate], stop: str, head: str) -> RunReport:
        """The sealed test, baseline and best (the head), once; the report, stored with the
        experiment's end."""
        best = next(c for c in cands if c.candidate_id == head)
        base, k, ev, test = cands[0], self.cfg.trials, self.evaluator, self.splits["test"]
        self.say(f"stopped: {stop}. Sealed test split: {len(test)} tasks x {k}, baseline and best")
        [base_test, *best_tests] = at_once(self, *[lambda c=c: ev.scores(c.candidate_id, c.harness, "test", test, k)
                                                   for c in {base.candidate_id: base, best.candidate_id: best}.values()])
        best_test = best_tests[0] if best_tests else base_test
        spent = self.ledger.spent()
        (bm, bl, bh), (tm, tl, th) = confidence_interval(base_test), confidence_interval(best_test)
        val_mean = {c.candidate_id: mean(self.val(c)) for c in cands if c.candidate_id in self.scores}
        png = self.store.path.parent / self.id / "progress.png"
        png.parent.mkdir(parents=True, exist_ok=True)
        write_progress_png([{"iteration": c.iteration, "status": c.status, "score": val_mean.get(c.candidate_id)}
                            for c in cands], png, title=f"{self.cfg.benchmark} / {self.cfg.model}: {len(cands)} candidates")
        report = RunReport(
            experiment_id=self.id, baseline_test_score=bm, baseline_test_ci=[bl, bh], best_test_score=tm,
            best_test_ci=[tl, th], best_candidate=best.candidate_id, iterations=len(cands) - 1,
            accepted=sum(c.status == "accepted" for c in cands), spend_usd=spent["task"] + spent["meta"], spend=spent,
            stop_reason=stop, validation_trials_saved=self.ledger.saved_trials(),
            best_validation_gain=self._gain(best), alpha_committed=self.ledger.spending(self.cfg.gate).spent,
            alpha=self.cfg.gate.alpha, candidates=[_reported(c, val_mean.get(c.candidate_id)) for c in cands],
            progress_png=str(png.resolve()), bilevel=self.search.finish() or None,
            audit=[asdict(f) for f in audit(self.store, self.id, self.tasks)] if any(c.status == "accepted" for c in cands) else None)
        self.ledger.finish("finished", report.to_dict())
        return report

    def _gain(self, best: Candidate) -> dict | None:
        """The best candidate's validation gain over its parent, three ways (None for the baseline or a
        candidate the fixed gate accepted)."""
        look = self.ledger.accepted_look(best.candidate_id)
        if look is None or look.estimate is None:
            return None
        e = look.estimate
        return {"selection_gain": e.selection_gain, "confirmation_gain": e.confirmation_gain,
                "adjusted_gain": e.adjusted_gain, "adjusted_ci": [e.low, e.high], "note": e.note}


def _reported(c: Candidate, val_mean: float | None) -> CandidateReport:
    def dump(v: Any) -> dict | None:
        return v.model_dump(mode="json") if v is not None else None

    return CandidateReport(id=c.candidate_id, status=c.status, parent=c.parent_id, rationale=c.rationale,
                           val_mean=val_mean, proposal_trace_id=c.proposal_trace_id, predictions=dump(c.predictions),
                           prediction_check=dump(c.prediction_check), liveness=dump(c.liveness))
