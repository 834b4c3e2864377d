"""Executors by name: where trials run. `local` is run_eval's default LocalExecutor (a thread
pool on this machine's Docker daemon); `ray` runs each trial as a Ray task on a node of a Ray
cluster, against that node's daemon (evaluation.ray_executor)."""

from __future__ import annotations

from typing import Any

from metaopt.core.errors import ExecutorError, UnknownName

EXECUTORS = {"local": "a thread pool of trials on this machine's Docker daemon",
             "ray": "each trial a Ray task on a node of a Ray cluster, against that node's Docker daemon"}


def make_executor(name: str, ray_address: str | None = None, *, image_map: Any = None) -> Any:
    """None for `local` (run_eval builds its LocalExecutor), a connected RayExecutor for `ray`
    (`image_map`: the driver's ImageMap, applied on the nodes). Raises UserError naming the option."""
    if name not in EXECUTORS:
        e = UnknownName("executor", name, list(EXECUTORS))
        e.field = "--executor"
        raise e
    if name == "local":
        if ray_address:
            raise ExecutorError("needs --executor ray", field="--ray-address")
        return None
    from metaopt.evaluation.ray_executor import RayExecutor

    executor = RayExecutor(ray_address, image_map=list(image_map.items()) if image_map is not None else None)
    executor.connect()
    return executor
