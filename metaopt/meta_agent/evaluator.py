"""The Evaluator: runs, scores and charges trials for any candidate, and reads back the trials
recorded for it; it implements the decision's narrow `judge.Evaluator` protocol (which also says,
from those trials, when a candidate is invalid: `judge.check`, after each look's trials).

Every trial is keyed by (experiment, candidate, split, task, attempt) through a deterministic run
id, so asking again runs only what is new; each trial is booked in the ledger's spend as it ends.
Nothing here assumes one candidate in flight: what it keeps is keyed by candidate id (the store's
trials), so several candidates may be judged at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from metaopt.benchmarks.task import Task
from metaopt.evaluation import HarnessAgent, TrialResult, run_eval
from metaopt.evaluation.runner import Executor
from metaopt.meta_agent import judge
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.gate import Scores
from metaopt.meta_agent.ledger import Ledger
from metaopt.meta_agent.liveness import measure
from metaopt.meta_agent.outcomes import Liveness
from metaopt.sandbox.base import Backend
from metaopt.task_agent.harness import Harness

if TYPE_CHECKING:
    from metaopt.traces.tracing import Tracing


class Evaluator(judge.Evaluator):
    def __init__(self, cfg: RunConfig, tasks: dict[str, Task], splits: dict[str, list[str]], ledger: Ledger, *,
                 canaries: list[str], backend: Backend | None, tracing: Tracing | None, executor: Executor | None = None,
                 on_trial: Callable[[TrialResult], None] = lambda r: None):
        self.cfg, self.tasks, self.splits, self.ledger, self.canaries = cfg, tasks, splits, ledger, canaries
        self.backend, self.tracing, self.executor, self.on_trial = backend, tracing, executor, on_trial
        self.t0 = time.monotonic()
        self.in_flight = 0
        """Trials submitted and not back yet, over every candidate being judged (the trial-count stop counts them)."""
        self.lock = threading.Lock()
        self.abort = threading.Event()
        self._runs: dict[str, threading.Lock] = {}
        """Set when the run is interrupted: every candidate's run in progress ends as on Ctrl-C."""

    @property
    def settings(self) -> judge.Settings:
        return judge.Settings(trials=self.cfg.trials, seed=self.cfg.seed, gate=self.cfg.gate, splits=self.splits,
                              canaries=self.canaries)

    def run(self, cid: str, harness: Harness, split: str, task_ids: list[str], k: int
            ) -> tuple[Scores, list[TrialResult]]:
        """`cid`'s scores on `task_ids`, K trials each (None: errored or not run: a stop came
        first), and the rows of its run of `split`. Runs only the trials not run before."""
        with self.lock:  # one run of a (candidate, split) at a time: two children may ask for one parent's reserve
            run_lock = self._runs.setdefault(f"{cid}:{split}", threading.Lock())
        with run_lock:
            return self._run(cid, harness, split, task_ids, k)

    def _run(self, cid: str, harness: Harness, split: str, task_ids: list[str], k: int
             ) -> tuple[Scores, list[TrialResult]]:
        agent = HarnessAgent(harness, self.cfg.model, base_url=self.cfg.base_url, tracing=self.tracing)
        flight = _InFlight(self, cid)
        result = run_eval([self.tasks[t] for t in task_ids], agent, benchmark=self.cfg.benchmark,
                          backend=self.backend, store=self.ledger.store, trials=k, concurrency=self.cfg.concurrency,
                          run_id=f"{cid}:{split}", dataset=self.cfg.dataset, executor=self.executor,
                          extra={"experiment_id": self.ledger.id, "candidate_id": cid, "split": split},
                          on_trial=flight.booked,
                          stop=None if split == "test" else flight.stop, abort=self.abort.is_set)  # the sealed test always runs whole
        scores: Scores = {t: [None] * k for t in task_ids}
        for r in result.rows:  # the run may hold more (other tasks, later attempts): a later stage ran them
            if r.task_id in scores and r.attempt < k:
                scores[r.task_id][r.attempt] = r.score
        return scores, result.rows

    def scores(self, cid: str, harness: Harness, split: str, task_ids: list[str], k: int) -> Scores:
        return self.run(cid, harness, split, task_ids, k)[0]

    def trials(self, cid: str, split: str) -> list[TrialResult]:
        """`cid`'s trials of `split` as the store has them. Any candidate, at any time, as often as asked."""
        return self.ledger.trials(cid, split)

    def liveness(self, parent: Harness, child: Harness, pid: str, cid: str, split: str) -> Liveness:
        """Whether `child`'s changes ran in its trials of `split` (meta_agent.liveness)."""
        ids = [r.trial_id for r in self.ledger.trials(cid, split)]
        parent_ids = [r.trial_id for r in self.ledger.trials(pid, split)]
        return measure(self.ledger.store, parent, child, ids, parent_ids, split)

    def price_per_trial(self) -> float:
        n = self.ledger.trials_run()
        return self.ledger.spent()["task"] / n if n else 0.0

    def spent_stop(self, in_flight: int = 0) -> str | None:
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


class _InFlight:
    """One run's trials, counted in the experiment's trials in flight (all candidates' runs
    together, so candidates judged at once never overshoot max_trials)."""

    def __init__(self, ev: Evaluator, cid: str):
        self.ev, self.cid, self.n = ev, cid, 0

    def stop(self) -> str | None:
        with self.ev.lock:  # the check and the count as one step: a concurrent run sees this trial
            if (why := self.ev.spent_stop(self.ev.in_flight)) is None:
                self.ev.in_flight += 1  # run_eval submits one trial after each None
                self.n += 1
        return why

    def booked(self, r: TrialResult) -> None:
        with self.ev.lock:
            if self.n > 0:  # the sealed test's trials were never counted (it has no stop)
                self.n -= 1
                self.ev.in_flight -= 1
        self.ev.ledger.spend("task", self.cid, r.trial_id, r.cost_usd, r.input_tokens or 0, r.output_tokens or 0)
        self.ev.on_trial(r)

