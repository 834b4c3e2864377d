"""Ray resource requests of trials: what one trial asks of a node, whether a node can hold it,
and how a request reads in an error line."""

from __future__ import annotations

from typing import Any

from metaopt.benchmarks.task import Task


def resources_of(task: Task) -> dict[str, float]:
    """The Ray resource request of one trial of `task`: its cpus (1 when unset), memory, gpus."""
    r = task.resources
    out = {"CPU": float(r.cpus or 1)}
    if r.memory_mb:
        out["memory"] = float(r.memory_mb * 2**20)
    if r.gpus:
        out["GPU"] = float(r.gpus)
    return out


def fits(node: dict[str, Any], request: dict[str, float]) -> bool:
    """Whether `node` (a ray.nodes() entry) is big enough for `request` in total, busy or not."""
    return all(node["Resources"].get(k, 0) >= v for k, v in request.items())


def describe(request: dict[str, float]) -> str:
    """`request` as it reads in an error line: "2 CPU, 512 MB memory, 0 GPU"."""
    parts = [f"{request.get('CPU', 0):g} CPU"]
    if "memory" in request:
        parts.append(f"{request['memory'] / 2**20:.0f} MB memory")
    parts.append(f"{request.get('GPU', 0):g} GPU")
    return ", ".join(parts)
