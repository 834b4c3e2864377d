"""Executors by name: where trials run. `local` is run_eval's default LocalExecutor (a thread
pool on this machine's Docker daemon); `ray` runs each trial as a Ray task on a node of a Ray
cluster, against that node's daemon (evaluation.ray_executor). Plugins add executors through the
`metaopt.executors` entry-point group; each target is a factory
`factory(ray_address: str | None, *, image_map) -> executor | None` (None: run_eval's local pool)."""

from __future__ import annotations

from typing import Any

from metaopt.core.errors import ExecutorError
from metaopt.core.registry import Registry

EXECUTORS = Registry("executor", "metaopt.executors", {
    "local": "metaopt.evaluation.executor:local",
    "ray": "metaopt.evaluation.executor:ray",
}, field="--executor")


def make_executor(name: str, ray_address: str | None = None, *, image_map: Any = None) -> Any:
    """None for `local` (run_eval builds its LocalExecutor), a connected RayExecutor for `ray`
    (`image_map`: the driver's ImageMap, applied on the nodes). Raises UserError naming the option."""
    return EXECUTORS.load(name)(ray_address, image_map=image_map)


def local(ray_address: str | None, *, image_map: Any = None) -> None:
    """A thread pool of trials on this machine's Docker daemon (built by run_eval)."""
    if ray_address:
        raise ExecutorError("needs --executor ray", field="--ray-address")


def ray(ray_address: str | None, *, image_map: Any = None) -> Any:
    """Each trial a Ray task on a node of a Ray cluster, against that node's Docker daemon."""
    from metaopt.evaluation.ray_executor import RayExecutor

    executor = RayExecutor(ray_address, image_map=list(image_map.items()) if image_map is not None else None)
    executor.connect()
    return executor
