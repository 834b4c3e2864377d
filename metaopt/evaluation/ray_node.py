"""What runs on a Ray node: one trial with the same run_trial, against the node's own Docker daemon.

`trial_on_node` is the body of the Ray task (a streaming generator: it first yields where it
runs, so the driver knows which node a trial died on, then the result). It unpacks the task's
files into the node's cache, builds or reuses the image through a per-node `NodeImageCache`,
runs the trial, and returns the trial row and its spans, collected in memory: the node never
writes the store. `cleanup_on_node` removes one run's containers from the node's daemon.

Ray is imported only inside the functions: this module imports without it.
"""

from __future__ import annotations

import copy
import hashlib
import os
import threading
from typing import Any

from metaopt.benchmarks.task import Task, TaskLoadError
from metaopt.evaluation.hardware import hardware
from metaopt.evaluation.task_files import node_lock, unpack
from metaopt.evaluation.trial import ImageCache, run_trial
from metaopt.sandbox.docker import DockerBackend
from metaopt.sandbox.docker_services import ServiceSpec
from metaopt.sandbox.forensics import Pristine
from metaopt.sandbox.images import ImageMap
from metaopt.traces.shipping import collecting_tracing

DISPATCH = "metaopt.dispatch"  # the container label naming one dispatch of a trial

# Per worker process (Ray reuses a worker for many tasks): one Docker client per image map, one
# image cache per run. The node lock makes the cache per node: concurrent workers wait for the
# one that builds, then find the tag present (build_image checks the daemon first).
_LOCK = threading.Lock()
_BACKENDS: dict[tuple | None, DockerBackend] = {}
_CACHES: dict[str, NodeImageCache] = {}


class NodeImageCache(ImageCache):
    """ImageCache whose builds are serialised across every process on the node, so one image
    is built once per node however many trials of its task run there at once."""

    def _build(self, task: Task) -> tuple[str, str, list[ServiceSpec], tuple[str, str] | None]:
        key = hashlib.sha256(f"{task.id}\0{task.environment.context_dir}".encode()).hexdigest()[:24]
        with node_lock(f"image-{key}"):
            return super()._build(task)


def _backend(image_map: list[tuple[str, str]] | None) -> DockerBackend:
    """The node's Docker client with the driver's image map (None: the packaged defaults)."""
    key = None if image_map is None else tuple(map(tuple, image_map))
    with _LOCK:
        if key not in _BACKENDS:
            _BACKENDS[key] = DockerBackend(image_map=ImageMap.load() if image_map is None else ImageMap(image_map))
        return _BACKENDS[key]


def _images(run_id: str, backend: DockerBackend) -> NodeImageCache:
    with _LOCK:
        if run_id not in _CACHES:
            while len(_CACHES) >= 8:  # a long-lived worker serves many runs: keep the latest few
                _CACHES.pop(next(iter(_CACHES)))
            _CACHES[run_id] = NodeImageCache(backend)
        return _CACHES[run_id]


def where() -> dict[str, Any]:
    """This node, as the trial row's `hardware` records it."""
    import ray

    return {**hardware(), "ray_node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}


def trial_on_node(payload: dict[str, Any], blobs: dict[str, Any], attempt: int, agent: Any, *, run_id: str,
                  timeout_multiplier: float, image_map: list[tuple[str, str]] | None, traced: bool,
                  dispatch: str = ""):
    """Yields {"kind": "started", "node": where()}, then {"kind": "result", "result": the
    TrialResult as JSON, "spans": shipped spans}.
    Per-task failures are in the row; a node without a Docker daemon raises SandboxUnavailable
    (the driver retries the trial on another node). `dispatch` labels the container, so the
    driver's cleanup after a failed dispatch removes that dispatch's container only, never the
    container of the retry that may already run on the same daemon."""
    import ray

    node = where()
    yield {"kind": "started", "node": node}
    task: Task | TaskLoadError = unpack(payload, lambda digest: ray.get(blobs[digest]))
    backend = _backend(image_map)
    # A worker that died mid-trial left its container; this attempt replaces it.
    backend.prune(run_id, labels={"metaopt.task_id": task.id, "metaopt.attempt": str(attempt)})
    tracing = collector = None
    if traced:
        tracing, collector = collecting_tracing()
        agent = copy.copy(agent)
        agent.tracing = tracing
    try:
        result = run_trial(task, attempt, agent, backend=backend, images=_images(run_id, backend), run_id=run_id,
                           timeout_multiplier=timeout_multiplier, labels={DISPATCH: dispatch} if dispatch else None)
    finally:
        if tracing is not None:
            tracing.shutdown()
        Pristine.release()  # a Ray worker is killed, never exits: its atexit would not remove them
    result = result.model_copy(update={"hardware": {k: v for k, v in node.items() if k != "pid"}})
    yield {"kind": "result", "result": result.model_dump_json(), "spans": collector.take() if collector else []}


def cleanup_on_node(run_id: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Remove the containers of `run_id` (those also carrying `labels`, when given) from this
    node's daemon."""
    counts = DockerBackend().prune(run_id, labels=labels)
    return {"hostname": hardware()["hostname"], **counts}
