"""Evaluate an agent on a list of tasks: a thread pool of trials, each in its own sandbox.

The calling thread owns the store and writes each trial as it finishes, so an interruption
(Ctrl-C, SIGTERM) keeps every finished trial. On interruption every container of the run is
removed by label before the exception propagates.
"""

from __future__ import annotations

import secrets
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from benchmarks.agents import Agent
from benchmarks.task import Task, TaskLoadError
from meta_agent.trial import ImageCache, run_trial
from traces.store import Store


def new_run_id() -> str:
    return f"run-{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


@dataclass
class EvalResult:
    run_id: str
    benchmark: str
    agent: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False

    @property
    def mean_score(self) -> float | None:
        """Mean over scored trials; errors are excluded (they lower coverage, not the score)."""
        scores = [r["score"] for r in self.rows if r.get("score") is not None]
        return sum(scores) / len(scores) if scores else None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "benchmark": self.benchmark,
            "agent": self.agent,
            "tasks": [
                {"task_id": r["task_id"], "trial": r["attempt"], "score": r.get("score"), "status": r["status"],
                 "duration_s": r.get("duration_s"), **({"error": r["error"]} if r.get("error") else {})}
                for r in sorted(self.rows, key=lambda r: (r["task_id"], r["attempt"]))
            ],
            "mean_score": self.mean_score,
            "n_errors": sum(r["status"] == "error" for r in self.rows),
            "interrupted": self.interrupted,
        }


def hardware() -> dict[str, Any]:
    from evaluation.hardware import hardware as probe

    return probe()


def run_eval(
    tasks: list[Task | TaskLoadError],
    agent: Agent,
    *,
    benchmark: str,
    backend: Any,
    store: Store,
    trials: int = 1,
    concurrency: int = 2,
    timeout_multiplier: float = 1.0,
    run_id: str | None = None,
    dataset: str | None = None,
    on_trial: Callable[[dict[str, Any]], None] | None = None,
    extra: dict[str, Any] | None = None,
    executor: Any = None,
    stop: Callable[[], str | None] | None = None,
) -> EvalResult:
    """Run `trials` attempts of every task with `agent`; record each finished trial in `store`.

    Idempotent per run id: a (task, attempt) whose trial is already in the store is not run again
    (its stored row is part of the result), so re-running a run id resumes it. `extra` columns
    (experiment_id, candidate_id, split) are added to every new row. `executor` (e.g.
    evaluation.ray_executor.RayExecutor) runs the trials elsewhere instead of this process's
    thread pool; it asks `stop()` before each dispatch and stops dispatching when it answers."""
    run_id = run_id or new_run_id()
    result = EvalResult(run_id, benchmark, agent.name)
    done = {(r["task_id"], r["attempt"]): r for r in store.trials(run_id)}
    result.rows.extend(done.values())
    store.begin_run(run_id, benchmark=benchmark, agent=agent.name, dataset=dataset,
                    args={"trials": trials, "concurrency": concurrency, "timeout_multiplier": timeout_multiplier,
                          "tasks": [t.id for t in tasks]})
    images = ImageCache(backend)
    hw = hardware()
    jobs = [(t, k) for k in range(trials) for t in tasks if (t.id, k) not in done]
    if executor is not None:
        return _run_elsewhere(executor, jobs, agent, result, benchmark=benchmark, backend=backend, store=store,
                              concurrency=concurrency, timeout_multiplier=timeout_multiplier, on_trial=on_trial,
                              extra=extra, hw=hw, stop=stop)
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="trial")
    pending: set[Future] = set()
    queue, stopped = list(reversed(jobs)), None
    try:
        while queue or pending:
            while queue and len(pending) < max(1, concurrency) and not stopped:  # lazy: stop() is asked per trial
                if stop is not None and (stopped := stop()):
                    break
                task, k = queue.pop()
                pending.add(pool.submit(run_trial, task, k, agent, backend=backend, images=images,
                                        run_id=run_id, timeout_multiplier=timeout_multiplier))
            if not pending:
                break
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                row = fut.result()
                row.setdefault("benchmark", benchmark)
                row.update(extra or {}, hardware=hw)
                store.add_trial(row)
                result.rows.append(row)
                if on_trial:
                    on_trial(row)
    except BaseException:
        result.interrupted = True
        for fut in pending:
            fut.cancel()
        _cleanup(backend, run_id)
        pool.shutdown(wait=True, cancel_futures=True)
        _cleanup(backend, run_id)  # a worker may have started a container while we pruned
        store.end_run(run_id, "interrupted")
        raise
    pool.shutdown(wait=True)
    store.end_run(run_id, "stopped" if stopped else "finished")
    return result


def _run_elsewhere(executor: Any, jobs: list, agent: Agent, result: EvalResult, *, benchmark: str, backend: Any,
                   store: Store, concurrency: int, timeout_multiplier: float, on_trial: Callable | None,
                   extra: dict | None, hw: dict, stop: Callable | None) -> EvalResult:
    """run_eval's loop for an executor that runs trials on other machines: rows (with the node's
    hardware) and spans come back here, the only writer."""
    tracing = getattr(agent, "tracing", None)
    on_spans = None
    if tracing is not None:
        from traces.shipping import ingest

        on_spans = lambda spans: ingest(tracing, spans)  # noqa: E731
    rows = executor.run(jobs, agent, backend=backend, run_id=result.run_id, timeout_multiplier=timeout_multiplier,
                        concurrency=concurrency, on_spans=on_spans, stop=stop)
    try:
        for row in rows:
            row.setdefault("benchmark", benchmark)
            row.update(extra or {})
            row.setdefault("hardware", hw)
            store.add_trial(row)
            result.rows.append(row)
            if on_trial:
                on_trial(row)
    except BaseException:
        result.interrupted = True
        rows.close()  # the executor cancels its trials and cleans every node
        store.end_run(result.run_id, "interrupted")
        raise
    store.end_run(result.run_id, "stopped" if getattr(executor, "stopped", None) else "finished")
    return result


def _cleanup(backend: Any, run_id: str) -> None:
    for _ in range(3):
        try:
            backend.prune(run_id)
            return
        except Exception:  # the daemon may be busy tearing down; try again briefly
            time.sleep(0.5)
