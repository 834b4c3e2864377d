"""The `ray` executor: each trial a Ray task on some node of a cluster of Docker hosts.

The driver (this process) stays the only writer of the store: a node runs the trial against its
own Docker daemon and sends back the trial row and its spans (evaluation.ray_node); the driver
ingests the spans through its own exporter and hands the row to the runner, which writes it.

- Resources: a trial asks Ray for its task's cpus, memory and gpus, so Ray places it only on a
  node that has them free. A trial no node could ever hold is an `error` row saying so.
- Dispatch is lazy: at most `concurrency` trials are in flight, and `stop()` is asked before each
  dispatch, so a budget stop overshoots by the trials already running, never more.
- Faults: a worker or node that dies mid-trial, or a node whose Docker daemon is unreachable, is
  an infrastructure failure: the trial is dispatched again, preferring another node, at most
  `max_infra_retries` times, then recorded as an `error` row (failure_mode infra_error; no
  score). Each failure is kept in the row's `infra_errors`.
- Interruption (Ctrl-C, SIGTERM, an exception in the caller): in-flight tasks are cancelled
  (their trials remove their own containers), stragglers are killed, and a cleanup task pinned
  to every alive node removes the run's containers by label.
"""

from __future__ import annotations

import collections
import logging
import random
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from benchmarks.task import Task, TaskLoadError
from evaluation.executor import ExecutorError
from evaluation.task_files import pack
from meta_agent.trial import run_trial
from sandbox.errors import SandboxUnavailable

log = logging.getLogger(__name__)
NAMESPACE = "metaopt"
CANCEL_GRACE_S = 15.0  # what a cancelled trial gets to stop its agent and remove its container


@dataclass
class _Flight:
    task: Task
    attempt: int
    request: dict[str, float]
    node: dict[str, Any] | None = None
    failures: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)


def _ray():
    try:
        import ray
    except ImportError:
        raise ExecutorError("--executor ray needs Ray: pip install 'metaopt[ray]'") from None
    return ray


def resources_of(task: Task) -> dict[str, float]:
    """The Ray resource request of one trial of `task`: its cpus (1 when unset), memory, gpus."""
    r = task.resources
    out = {"CPU": float(r.cpus or 1)}
    if r.memory_mb:
        out["memory"] = float(r.memory_mb * 2**20)
    if r.gpus:
        out["GPU"] = float(r.gpus)
    return out


def _options(request: dict[str, float]) -> dict[str, Any]:
    opts: dict[str, Any] = {"num_cpus": request["CPU"], "num_gpus": request.get("GPU", 0)}
    if "memory" in request:
        opts["memory"] = request["memory"]
    return opts


def _fits(node: dict[str, Any], request: dict[str, float]) -> bool:
    return all(node["Resources"].get(k, 0) >= v for k, v in request.items())


def _infra(exc: BaseException) -> bool:
    """True for failures of the machinery, not of the trial: a dead worker or node, a lost
    object, a node that cannot reach its Docker daemon or set up its runtime env."""
    ray = _ray()
    ex = ray.exceptions
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
    local single-node Ray). `runtime_env` is passed to ray.init (e.g. env_vars for the nodes)."""

    name = "ray"

    def __init__(self, address: str | None = None, *, max_infra_retries: int = 2,
                 runtime_env: dict[str, Any] | None = None):
        self.address, self.max_infra_retries, self.runtime_env = address, max_infra_retries, runtime_env
        self._remote: Any = None
        self._cleanup_remote: Any = None
        self._nodes: tuple[float, list[dict[str, Any]]] | None = None
        self.stopped: str | None = None
        """Why the last run() stopped dispatching early (stop()'s answer), or None."""
        self.flights: list[tuple[float, float]] = []
        """(seconds from dispatch to result on the driver, the trial's own duration_s) per trial
        of the last run(): the difference is what dispatching through Ray cost."""

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
                ray.init(address=self.address, namespace=NAMESPACE, logging_level="ERROR", log_to_driver=False,
                         runtime_env=self.runtime_env, configure_logging=True)
            except (ConnectionError, RuntimeError, ValueError) as e:
                where = self.address or "RAY_ADDRESS / a new local Ray"
                raise ExecutorError(f"--ray-address {where}: cannot join the Ray cluster: "
                                    f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}") from None
            finally:
                if main and before is not None:  # ray.init turns SIGTERM into sys.exit; keep the caller's handler
                    signal.signal(signal.SIGTERM, before)
            # Ray prints the cluster's error messages (a worker died...) on the driver's stdout,
            # which `--json` keeps for its one object; each failure is logged here instead.
            ray._private.worker._worker_logs_enabled = False
        from evaluation.ray_node import cleanup_on_node, trial_on_node

        self._remote = ray.remote(num_returns="streaming", max_retries=0)(trial_on_node)
        self._cleanup_remote = ray.remote(num_cpus=0, max_retries=1)(cleanup_on_node)

    def nodes(self, max_age_s: float = 5.0) -> list[dict[str, Any]]:
        """The cluster's alive nodes (ray.nodes() entries), asked of the GCS at most every
        `max_age_s` seconds (each dispatch looks at them)."""
        if self._nodes is None or time.monotonic() - self._nodes[0] > max_age_s:
            self._nodes = (time.monotonic(), [n for n in _ray().nodes() if n.get("Alive")])
        return self._nodes[1]

    # -- running -----------------------------------------------------------------------------
    def run(self, jobs: list[tuple[Task | TaskLoadError, int]], agent: Any, *, backend: Any, run_id: str,
            timeout_multiplier: float = 1.0, concurrency: int = 2, on_spans: Callable[[list], None] | None = None,
            stop: Callable[[], str | None] | None = None) -> Iterator[dict[str, Any]]:
        """Yield the row of each finished trial of `jobs` ((task, attempt) pairs), in finishing
        order. `on_spans(spans)` receives a trial's shipped spans before its row is yielded.
        `backend` is the driver's DockerBackend: its image map goes to the nodes."""
        ray = _ray()
        self.connect()
        traced = getattr(agent, "tracing", None) is not None
        shipped = copy_without_tracing(agent)
        agent_ref = ray.put(shipped)
        image_map = list(backend.image_map.items()) if getattr(backend, "image_map", None) is not None else []
        packed: dict[str, tuple[dict, dict[str, Any]]] = {}
        flights: dict[Any, _Flight] = {}
        queue = collections.deque(jobs)

        def dispatch(f: _Flight, avoid: set[str] = frozenset()) -> dict[str, Any] | None:
            """Submit `f`; returns an error row instead when no alive node could ever hold it."""
            nodes = self.nodes()
            fit = [n for n in nodes if _fits(n, f.request)]
            if not fit:
                largest = max(nodes, key=lambda n: n["Resources"].get("CPU", 0), default=None)
                have = {k: v for k, v in (largest or {}).get("Resources", {}).items() if k in ("CPU", "GPU", "memory")}
                return _error_row(f, run_id, agent, f"no node of the Ray cluster can hold this trial: it asks "
                                  f"{_fmt(f.request)}, the largest node has {_fmt(have)}")
            opts = _options(f.request)
            elsewhere = [n for n in fit if n["NodeID"] not in avoid]
            if avoid and elsewhere:
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(random.choice(elsewhere)["NodeID"], soft=True)
            if f.task.id not in packed:
                payload, blobs = pack(f.task)
                packed[f.task.id] = (payload, {d: ray.put(b) for d, b in blobs.items()})
            payload, blob_refs = packed[f.task.id]
            gen = self._remote.options(**opts).remote(payload, blob_refs, f.attempt, agent_ref, run_id=run_id,
                                                      timeout_multiplier=timeout_multiplier, image_map=image_map,
                                                      traced=traced)
            f.node, f.started = None, time.monotonic()
            flights[gen] = f
            return None

        self.stopped, self.flights = None, []
        try:
            while queue or flights:
                while queue and len(flights) < max(1, concurrency) and not self.stopped:
                    if stop is not None and (reason := stop()):
                        self.stopped = reason
                        break
                    task, attempt = queue.popleft()
                    if isinstance(task, TaskLoadError):  # nothing to run: the error row is made here
                        yield run_trial(task, attempt, agent, backend=None, images=None, run_id=run_id,
                                        timeout_multiplier=timeout_multiplier)
                        continue
                    row = dispatch(_Flight(task, attempt, resources_of(task)))
                    if row is not None:
                        yield row
                if not flights:
                    break
                ready, _ = ray.wait(list(flights), num_returns=1, timeout=0.5)
                for gen in ready:
                    f = flights[gen]
                    try:
                        item = ray.get(next(gen))
                    except StopIteration:  # ended without a result: treat as a lost worker
                        item = None
                        exc: BaseException = RuntimeError("the trial's task ended without a result")
                    except Exception as e:  # noqa: BLE001 (sorted just below)
                        if not _infra(e):
                            flights.pop(gen)
                            raise
                        item, exc = None, e
                    if item is not None and item["kind"] == "started":
                        f.node = item["node"]
                        continue
                    flights.pop(gen)
                    if item is None:
                        node = f.node or {}
                        f.failures.append({"node": node.get("hostname"), "ray_node_id": node.get("ray_node_id"),
                                           "error": _describe(exc), "after_s": round(time.monotonic() - f.started, 1)})
                        log.warning("trial %s/%s/%d: %s on %s; %s", run_id, f.task.id, f.attempt,
                                    f.failures[-1]["error"], f.failures[-1]["node"] or "a node",
                                    "dispatching it again" if len(f.failures) <= self.max_infra_retries else "giving up")
                        if len(f.failures) <= self.max_infra_retries:
                            self._nodes = None  # a node may have died: look again
                            avoid = {x["ray_node_id"] for x in f.failures if x["ray_node_id"]}
                            row = dispatch(f, avoid)
                        else:
                            row = _error_row(f, run_id, agent, f"infrastructure failed {len(f.failures)} times, "
                                             f"last: {f.failures[-1]['error']} (on {f.failures[-1]['node']})")
                        if row is not None:
                            yield row
                        continue
                    if on_spans is not None and item["spans"]:
                        on_spans(item["spans"])
                    row = item["row"]
                    row["infra_errors"] = f.failures or None
                    self.flights.append((time.monotonic() - f.started, float(row.get("duration_s") or 0.0)))
                    yield row
        except BaseException:
            self._abort(list(flights), run_id)
            raise
        self.cleanup(run_id)  # containers a dead worker left on a node that is still alive

    def _abort(self, gens: list[Any], run_id: str) -> None:
        """Cancel in-flight trials, give them CANCEL_GRACE_S to remove their containers, kill
        the rest, then remove the run's containers on every node."""
        ray = _ray()
        for gen in gens:
            ray.cancel(gen, force=False)
        if gens:
            _, left = ray.wait(gens, num_returns=len(gens), timeout=CANCEL_GRACE_S)
            for gen in left:
                ray.cancel(gen, force=True)
        self.cleanup(run_id)

    def cleanup(self, run_id: str, timeout_s: float = 60) -> list[dict[str, Any]]:
        """One cleanup task pinned to each alive node removes the run's containers there.
        Returns each node's counts; a node that does not answer in time is left out."""
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        refs = [self._cleanup_remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(run_id) for n in self.nodes(max_age_s=0)]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        out = []
        for ref in ready:
            try:
                out.append(ray.get(ref))
            except Exception:  # noqa: BLE001 (a node without a daemon has nothing to clean)
                continue
        return out


def _probe(address: str | None, timeout_s: float = 10) -> None:
    """Fail fast, in one line, when nothing listens at a host:port address (ray.init would retry
    for minutes). Other forms (None, "auto", ray://...) are left to ray.init."""
    host, _, port = (address or "").rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ExecutorError(f"--ray-address {address}: cannot join the Ray cluster: {e.strerror or e} "
                            f"(is `ray start --head --port {port}` running there?)") from None


def copy_without_tracing(agent: Any) -> Any:
    """`agent` as it can travel to a node: its Tracing (a store connection) left behind."""
    if getattr(agent, "tracing", None) is None:
        return agent
    import copy

    shipped = copy.copy(agent)
    shipped.tracing = None
    return shipped


def _error_row(f: _Flight, run_id: str, agent: Any, error: str) -> dict[str, Any]:
    from traces.store import now

    return {"trial_id": f"{run_id}/{f.task.id}/{f.attempt}", "run_id": run_id, "task_id": f.task.id,
            "attempt": f.attempt, "agent": agent.name, "benchmark": f.task.benchmark, "status": "error",
            "failure_mode": "infra_error", "error": f"{f.task.id}: {error}", "started_at": now(), "finished_at": now(),
            "duration_s": round(sum(x["after_s"] for x in f.failures), 3), "infra_errors": f.failures or None}


def _fmt(request: dict[str, float]) -> str:
    parts = [f"{request.get('CPU', 0):g} CPU"]
    if "memory" in request:
        parts.append(f"{request['memory'] / 2**20:.0f} MB memory")
    parts.append(f"{request.get('GPU', 0):g} GPU")
    return ", ".join(parts)
