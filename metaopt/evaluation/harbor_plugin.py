"""A Harbor job plugin: `harbor run ... --plugin metaopt [--pk db=PATH] [--pk run_id=ID]`.

Registered in Harbor's plugin entry-point group (`harbor.plugins`, pyproject.toml). Each trial is
written into the metaopt store as it ends (Job.on_trial_ended: Harbor swallows job-end failures,
so nothing waits for the job's end), through the importer's own writer (harbor_jobs.import_trial):
the same run id, trial rows, spans and messages as `metaopt import harbor JOB_DIR`, which then
adds nothing. The store is opened per trial and closed again, so other readers see it between
trials. A failed write is logged and the job goes on (a plugin must not fail trials).
Harbor's types are used duck-typed: this module imports no harbor code at import time.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from metaopt.traces.store import DEFAULT_PATH

log = logging.getLogger(__name__)


class MetaoptPlugin:
    """Harbor JobPlugin (on_job_start / on_job_end) writing trials into a metaopt store."""

    def __init__(self, db: str | Path = DEFAULT_PATH, run_id: str | None = None, benchmark: str = "harbor",
                 **_: Any) -> None:
        self.db, self.run_id, self.benchmark = Path(db), run_id, benchmark
        self.written: list[str] = []
        self._lock = asyncio.Lock()

    async def on_job_start(self, job: Any) -> None:
        self.run_id = self.run_id or f"harbor-{job.config.job_name}"
        self.job_dir = Path(job.job_dir)
        await asyncio.to_thread(self._begin)
        job.on_trial_ended(self.on_trial_end)

    async def on_trial_end(self, event: Any) -> None:
        trial_dir = Path(event.config.trials_dir) / event.config.trial_name
        result = event.result.model_dump(mode="json")
        async with self._lock:  # one writer at a time: DuckDB allows one connection per process
            try:
                await asyncio.to_thread(self._write, trial_dir, result)
            except Exception:
                log.warning("metaopt plugin: could not write trial %s to %s", trial_dir.name, self.db, exc_info=True)

    async def on_job_end(self, job_result: Any) -> None:
        async with self._lock:
            await asyncio.to_thread(self._end)

    # -- store writes (worker thread) ---------------------------------------------------------
    def _begin(self) -> None:
        from metaopt.traces.store import Store

        with Store(self.db) as store:
            assert self.run_id
            store.begin_run(self.run_id, benchmark=self.benchmark, agent="harbor", dataset=str(self.job_dir),
                            args={"imported_from": str(self.job_dir), "harbor_plugin": True})

    def _write(self, trial_dir: Path, result: dict[str, Any]) -> None:
        from metaopt.evaluation.harbor_jobs import import_trial
        from metaopt.traces.store import Store
        from metaopt.traces.tracing import Tracing

        with Store(self.db) as store:
            tracing = Tracing.for_store(store)
            try:
                assert self.run_id
                rec = import_trial(store, trial_dir, result, run_id=self.run_id, benchmark=self.benchmark,
                                   tracing=tracing)
            finally:
                tracing.shutdown()
        if rec is not None:
            self.written.append(rec.trial_id)

    def _end(self) -> None:
        from metaopt.traces.store import Store

        with Store(self.db) as store:
            assert self.run_id
            store.end_run(self.run_id, "finished")
