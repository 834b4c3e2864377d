"""Where trials run, by name: `local` (a thread pool in this process, the default) or `ray`
(Ray tasks on a cluster of Docker hosts, evaluation.ray_executor)."""

from __future__ import annotations

from typing import Any

EXECUTORS = {"local": "a thread pool of trials on this machine's Docker daemon",
             "ray": "each trial a Ray task on a node of a Ray cluster, against that node's Docker daemon"}


class ExecutorError(ValueError):
    """The executor cannot run (unknown name, Ray missing, no cluster at the address). One line, exit 2."""


def make_executor(name: str, ray_address: str | None = None) -> Any:
    """None for `local` (run_eval's own pool), a connected RayExecutor for `ray`. Raises
    ExecutorError naming the option at fault."""
    if name not in EXECUTORS:
        raise ExecutorError(f"--executor: unknown executor '{name}' (known: {', '.join(EXECUTORS)})")
    if name == "local":
        if ray_address:
            raise ExecutorError("--ray-address needs --executor ray")
        return None
    from evaluation.ray_executor import RayExecutor

    executor = RayExecutor(ray_address)
    executor.connect()
    return executor
