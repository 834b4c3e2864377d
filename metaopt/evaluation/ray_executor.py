"""The `ray` executor: each trial a Ray task on some node of a cluster of Docker hosts.

It implements evaluation.runner's Executor seam (submit a TrialJob, get a Future[TrialResult]).
The driver (this process) stays the only writer of the store: a node runs the same run_trial
against its own Docker daemon and sends back the TrialResult (as JSON) and the trial's spans
(evaluation.ray_node); the spans are ingested here through the agent's own Tracing, before the
future resolves, so run_eval writes the row after its spans, as it does for a local trial.

- Resources: a trial asks Ray for its task's cpus (1 when unset), memory and gpus, so Ray places
  it only on a node that has them free. A trial no alive node could ever hold is an `error`
  result saying so, not a task waiting forever. run_eval bounds how many are in flight.
- Faults: a worker or node that dies mid-trial, or a node whose Docker daemon is unreachable, is
  an infrastructure failure: the trial is dispatched again, preferring another node, at most
  `max_infra_retries` times, then it is an `error` result (failure_mode infra_error; no score).
  Every failure is kept in the result's `infra_errors`; the dead attempt's container is removed
  on its node (if alive) and by the next attempt on the same daemon.
- Interruption: `shutdown(cancel=True)` cancels the in-flight tasks (each trial removes its own
  container), kills those still running after CANCEL_GRACE_S, and `cleanup(run_id)` runs one
  cleanup task pinned to every alive node that removes the run's containers by label.

One dispatcher thread owns the in-flight Ray tasks; submit() and shutdown() only hand it work.
"""

from __future__ import annotations

import collections
import logging
import random
import re
import secrets
import signal
import socket
import threading
import time
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from typing import Any

from metaopt.benchmarks.task import Task, TaskLoadError
from metaopt.core.errors import ExecutorError, MissingExtra, SandboxUnavailable
from metaopt.evaluation.ray_node import DISPATCH
from metaopt.evaluation.ray_resources import describe, fits, resources_of
from metaopt.evaluation.result import TrialResult, trial_row
from metaopt.evaluation.runner import TrialJob
from metaopt.evaluation.task_files import pack
from metaopt.evaluation.trial import run_trial
from metaopt.traces.store import now

log = logging.getLogger(__name__)
NAMESPACE = "metaopt"
CANCEL_GRACE_S = 15.0  # what a cancelled trial gets to stop its agent and remove its container


@dataclass
class _Flight:
    job: TrialJob
    future: Future
    request: dict[str, float]
    node: dict[str, Any] | None = None
    dispatch: str = ""  # this dispatch's container label (evaluation.ray_node.DISPATCH)
    failures: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)


def _ray():
    try:
        import ray
    except ImportError:
        raise MissingExtra("--executor ray", "ray", "ray") from None
    return ray


def _infra(exc: BaseException) -> bool:
    """True for failures of the machinery, not of the trial: a dead worker or node, a lost
    object, a node that cannot reach its Docker daemon or set up its runtime env."""
    _ray()
    import ray.exceptions as ex
    kinds = tuple(getattr(ex, n) for n in ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError",
                                           "ObjectLostError", "OutOfMemoryError", "RuntimeEnvSetupError",
                                           "RaySystemError", "ActorDiedError") if hasattr(ex, n))
    if isinstance(exc, kinds):
        return True
    return isinstance(exc, ex.RayTaskError) and isinstance(exc.cause, SandboxUnavailable)


def _describe(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) if type(exc).__name__.startswith("RayTaskError") else None
    text = str(cause if cause is not None else exc).strip().splitlines()
    return f"{type(cause or exc).__name__}: {text[-1] if text else ''}"[:300]


class RayExecutor:
    """Runs trials as Ray tasks on the cluster at `address` (None: RAY_ADDRESS, else a new
    local single-node Ray). `image_map`: (pattern, image) pairs applied on the nodes;
    `runtime_env` goes to ray.init (e.g. env_vars for the nodes)."""

    name = "ray"

    def __init__(self, address: str | None = None, *, max_infra_retries: int = 2,
                 image_map: list[tuple[str, str]] | None = None, runtime_env: dict[str, Any] | None = None):
        self.address, self.max_infra_retries, self.runtime_env = address, max_infra_retries, runtime_env
        self.image_map = None if image_map is None else [tuple(e) for e in image_map]  # None: the nodes' defaults
        self._remote: Any = None
        self._cleanup_remote: Any = None
        self._nodes: tuple[float, list[dict[str, Any]]] | None = None
        self._lock = threading.Lock()
        self._queue: collections.deque[tuple[TrialJob, Future]] = collections.deque()
        self._wake = threading.Event()
        self._cancel = False
        self._thread: threading.Thread | None = None
        self._packed: dict[tuple[str, str], tuple[dict, dict[str, Any]]] = {}  # (run, task) -> payload, blob refs
        self._agents: dict[int, tuple[Any, Any]] = {}  # id(agent) -> (agent, its ObjectRef in the store)
        self.flights: list[tuple[float, float]] = []
        """(seconds from dispatch to result, the trial's own duration_s) per finished trial: the
        difference is what dispatching through Ray cost (perf/ray_overhead.py)."""

    # -- connection --------------------------------------------------------------------------
    def connect(self) -> None:
        """Join the cluster (once). Raises ExecutorError naming the address if it cannot."""
        ray = _ray()
        if self._remote is not None:
            return
        if not ray.is_initialized():
            _probe(self.address)
            main = threading.current_thread() is threading.main_thread()
            before = signal.getsignal(signal.SIGTERM) if main else None
            try:
                ray.init(address=self.address, namespace=NAMESPACE, log_to_driver=False, runtime_env=self.runtime_env,
                         logging_level="ERROR")  # pyright: ignore[reportArgumentType] - ray's stub says int; it takes level names
            except (ConnectionError, RuntimeError, ValueError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ExecutorError(f"{self.address or 'RAY_ADDRESS'}: cannot join the Ray cluster: {first}",
                                    field="--ray-address") from None
            finally:
                if main and before is not None:  # ray.init turns SIGTERM into sys.exit; keep the caller's handler
                    signal.signal(signal.SIGTERM, before)
            # Ray prints the cluster's error messages (a worker died...) on the driver's stdout,
            # which `--json` keeps for its one object; each failure is logged here instead.
            ray._private.worker._worker_logs_enabled = False  # pyright: ignore - private, and no public switch exists
        from metaopt.evaluation.ray_node import cleanup_on_node, trial_on_node

        self._remote = ray.remote(num_returns="streaming", max_retries=0)(trial_on_node)  # pyright: ignore[reportCallIssue, reportArgumentType] - ray's overloads stop at positional-only functions
        self._cleanup_remote = ray.remote(num_cpus=0, max_retries=1)(cleanup_on_node)

    def nodes(self, max_age_s: float = 5.0) -> list[dict[str, Any]]:
        """The cluster's alive nodes (ray.nodes() entries), asked of the GCS at most every
        `max_age_s` seconds (each dispatch looks at them)."""
        if self._nodes is None or time.monotonic() - self._nodes[0] > max_age_s:
            self._nodes = (time.monotonic(), [n for n in _ray().nodes() if n.get("Alive")])
        return self._nodes[1]

    # -- the Executor seam -------------------------------------------------------------------
    def submit(self, job: TrialJob) -> Future:
        """Queue `job` for the dispatcher; its future resolves to the TrialResult."""
        self.connect()
        fut: Future = Future()
        if isinstance(job.task, TaskLoadError):  # nothing to run: the error result is made here
            fut.set_running_or_notify_cancel()
            fut.set_result(run_trial(job.task, job.attempt, job.agent, backend=None, images=None,
                                     run_id=job.run_id, timeout_multiplier=job.timeout_multiplier))
            return fut
        with self._lock:
            self._queue.append((job, fut))
            if self._thread is None or not self._thread.is_alive():
                self._cancel = False
                self._thread = threading.Thread(target=self._loop, name="ray-dispatch", daemon=True)
                self._thread.start()
        self._wake.set()
        return fut

    def cleanup(self, run_id: str, timeout_s: float = 60) -> list[dict[str, Any]]:
        """One cleanup task pinned to each alive node removes the run's containers there.
        Returns each node's counts; a node that does not answer in time is left out."""
        ray = _ray()
        self.connect()
        refs = [self._pinned(n["NodeID"]).remote(run_id) for n in self.nodes(max_age_s=0)]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        out = []
        for ref in ready:
            try:
                out.append(ray.get(ref))
            except Exception:  # noqa: BLE001, S112 - a node without a daemon has nothing to clean
                continue
        return out

    def shutdown(self, cancel: bool = False) -> None:
        """Wait for every submitted trial; with `cancel`, cancel them instead (queued ones are
        dropped, running ones interrupted, those still running after CANCEL_GRACE_S killed).
        The executor can be used again afterwards."""
        thread = self._thread
        if thread is None:
            return
        if cancel:
            self._cancel = True
            self._wake.set()
            thread.join(CANCEL_GRACE_S + 30)
        else:
            while thread.is_alive() and (self._queue or self._busy):
                thread.join(0.5)

    # -- the dispatcher thread ---------------------------------------------------------------
    _busy = False

    def _loop(self) -> None:
        ray = _ray()
        flights: dict[Any, _Flight] = {}
        try:
            while True:
                self._busy = bool(flights)
                if self._cancel:
                    return self._abort(flights)
                while self._queue:
                    job, fut = self._queue.popleft()
                    if fut.set_running_or_notify_cancel():  # False: run_eval cancelled it first
                        self._dispatch(_Flight(job, fut, resources_of(_loaded(job))), flights)
                self._busy = bool(flights or self._queue)
                if not flights:
                    if not self._wake.wait(0.5):
                        continue
                    self._wake.clear()
                    continue
                ready, _ = ray.wait(list(flights), num_returns=1, timeout=0.2)
                for gen in ready:
                    self._settle(gen, flights)
        except BaseException as e:  # noqa: BLE001 - the cluster went away under us: fail what is left, loudly
            log.error("ray dispatcher stopped: %s", _describe(e))
            for f in flights.values():
                if not f.future.done():
                    f.future.set_exception(e)
            while self._queue:
                _, fut = self._queue.popleft()
                if fut.set_running_or_notify_cancel():
                    fut.set_exception(e)
        finally:
            self._busy = False

    def _pinned(self, node_id: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return self._cleanup_remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))

    def _dispatch(self, f: _Flight, flights: dict[Any, _Flight], avoid: frozenset[str] = frozenset()) -> None:
        """Submit `f` as a Ray task, or resolve it with an error result when no alive node
        could ever hold it."""
        ray = _ray()
        job = f.job
        nodes = self.nodes()
        fit = [n for n in nodes if fits(n, f.request)]
        if not fit:
            largest = max(nodes, key=lambda n: n["Resources"].get("CPU", 0), default=None)
            have = {k: v for k, v in (largest or {}).get("Resources", {}).items() if k in ("CPU", "GPU", "memory")}
            return f.future.set_result(_error_result(f, f"no node of the Ray cluster can hold this trial: it asks "
                                                        f"{describe(f.request)}, the largest node has {describe(have)}"))
        opts: dict[str, Any] = {"num_cpus": f.request["CPU"], "num_gpus": f.request.get("GPU", 0)}
        if "memory" in f.request:
            opts["memory"] = f.request["memory"]
        elsewhere = [n for n in fit if n["NodeID"] not in avoid]
        if avoid and elsewhere:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(random.choice(elsewhere)["NodeID"], soft=True)
        key = (job.run_id, job.task.id)
        if key not in self._packed:
            try:
                payload, blobs = pack(_loaded(job))
            except (OSError, ValueError) as e:  # unreadable or too large: this task's failure, not the run's
                return f.future.set_result(_error_result(f, f"cannot ship the task's files to a node: {e}",
                                                         "environment_error"))
            if len(self._packed) > 512:  # a long experiment: keep the object store from holding every task
                self._packed.pop(next(iter(self._packed)))
            self._packed[key] = (payload, {d: ray.put(b) for d, b in blobs.items()})
        payload, blob_refs = self._packed[key]
        if id(job.agent) not in self._agents:  # one agent object per evaluation: keep the latest only
            self._agents = {id(job.agent): (job.agent, ray.put(copy_without_tracing(job.agent)))}
        traced = getattr(job.agent, "tracing", None) is not None
        dispatch = secrets.token_hex(6)
        gen = self._remote.options(**opts).remote(payload, blob_refs, job.attempt, self._agents[id(job.agent)][1],
                                                  run_id=job.run_id, timeout_multiplier=job.timeout_multiplier,
                                                  image_map=self.image_map, traced=traced, dispatch=dispatch)
        f.node, f.started, f.dispatch = None, time.monotonic(), dispatch
        flights[gen] = f

    def _settle(self, gen: Any, flights: dict[Any, _Flight]) -> None:
        """Take the next item of a ready task: where it started, its result, or its failure."""
        ray = _ray()
        f = flights[gen]
        item: dict[str, Any] | None
        try:
            item = ray.get(next(gen))  # pyright: ignore[reportAssignmentType] - one ref, one value: ray's stub picks its list overload
        except StopIteration:
            item, exc = None, RuntimeError("the trial's task ended without a result")
        except Exception as e:  # noqa: BLE001 (sorted just below)
            if not _infra(e):  # a bug or a systemic failure: run_eval raises it, as for a local trial
                flights.pop(gen)
                f.future.set_exception(e)
                return
            item, exc = None, e
        if item is not None and item["kind"] == "started":
            f.node = item["node"]
            return
        flights.pop(gen)
        if item is not None:
            tracing = getattr(f.job.agent, "tracing", None)
            if tracing is not None and item["spans"]:
                from metaopt.traces.shipping import ingest

                ingest(tracing, item["spans"])
            result = TrialResult.model_validate_json(item["result"])
            self.flights.append((time.monotonic() - f.started, float(result.duration_s or 0.0)))
            f.future.set_result(result.model_copy(update={"infra_errors": f.failures or None}))
            return
        node = f.node or {}
        if not node and (m := re.search(r"node ID: ([0-9a-f]{56})", str(exc))):  # died before we read where it ran
            node = {"ray_node_id": m.group(1)}
        f.failures.append({"node": node.get("hostname"), "ray_node_id": node.get("ray_node_id"),
                           "error": _describe(exc), "after_s": round(time.monotonic() - f.started, 1)})
        again = len(f.failures) <= self.max_infra_retries
        log.warning("trial %s/%s/%d: %s on %s; %s", f.job.run_id, f.job.task.id, f.job.attempt, f.failures[-1]["error"],
                    node.get("hostname") or "a node", "dispatching it again" if again else "giving up")
        self._nodes = None  # a node may have died: look again
        if node.get("ray_node_id") in {n["NodeID"] for n in self.nodes()}:  # its container, if the node lives;
            # by its dispatch label: the retry dispatched just below may share that node's daemon
            self._pinned(node["ray_node_id"]).remote(f.job.run_id, {DISPATCH: f.dispatch})
        if again:
            return self._dispatch(f, flights, frozenset(x["ray_node_id"] for x in f.failures if x["ray_node_id"]))
        f.future.set_result(_error_result(f, f"infrastructure failed {len(f.failures)} times, last: "
                                             f"{f.failures[-1]['error']} (on {f.failures[-1]['node']})"))

    def _abort(self, flights: dict[Any, _Flight]) -> None:
        """Cancel in-flight trials, give them CANCEL_GRACE_S to remove their containers, kill
        the rest; queued trials are dropped. Every future ends cancelled."""
        ray = _ray()
        gens = list(flights)
        for gen in gens:
            ray.cancel(gen, force=False)
        if gens:
            _, left = ray.wait(gens, num_returns=len(gens), timeout=CANCEL_GRACE_S)
            for gen in left:
                ray.cancel(gen, force=True)
        for f in flights.values():
            if not f.future.done():
                f.future.set_exception(CancelledError())
        while self._queue:
            self._queue.popleft()[1].cancel()


def _probe(address: str | None, timeout_s: float = 10) -> None:
    """Fail fast, in one line, when nothing listens at a host:port address (ray.init would retry
    for minutes). Other forms (None, "auto", ray://...) are left to ray.init."""
    host, _, port = (address or "").rpartition(":")
    if not host or not port.isdigit() or "://" in (address or ""):
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ExecutorError(f"{address}: cannot join the Ray cluster: {e.strerror or e} "
                            f"(is `ray start --head --port {port}` running there?)", field="--ray-address") from None


def copy_without_tracing(agent: Any) -> Any:
    """`agent` as it can travel to a node: its Tracing (a store connection) left behind."""
    if getattr(agent, "tracing", None) is None:
        return agent
    import copy

    shipped = copy.copy(agent)
    shipped.tracing = None
    return shipped


def _loaded(job: TrialJob) -> Task:
    """The job's task; a TaskLoadError is settled in submit() and never dispatched."""
    if isinstance(job.task, TaskLoadError):
        raise TypeError(f"{job.task.id}: a task that failed to load reached the Ray dispatcher")
    return job.task


def _error_result(f: _Flight, error: str, failure_mode: str = "infra_error") -> TrialResult:
    job = f.job
    return trial_row(job.run_id, job.task.id, job.attempt, benchmark=_loaded(job).benchmark, agent=job.agent.name,
                     status="error", failure_mode=failure_mode, error=f"{job.task.id}: {error}",
                       timeout_multiplier=job.timeout_multiplier, started_at=now(), finished_at=now(),
                       duration_s=round(sum(x["after_s"] for x in f.failures), 3), infra_errors=f.failures or None)
