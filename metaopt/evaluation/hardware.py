"""Where a trial ran: the machine's hostname and a fingerprint of its hardware.

Scores and durations are compared only like with like: the fingerprint hashes what changes a
trial's speed (CPU model and count, memory, GPUs, architecture), not the hostname, so identical
nodes of a cluster share one fingerprint.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import socket
import subprocess
from typing import Any


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _gpus() -> list[str]:
    """GPU names from nvidia-smi, [] without one (or without NVIDIA's tools)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10, check=True).stdout  # a failing nvidia-smi prints its error to stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def hardware() -> dict[str, Any]:
    """This machine: hostname, architecture, CPUs, memory, GPUs, Python, and `fingerprint`
    (12 hex digits over the hardware fields). Probed once per process; a fresh dict each call."""
    return dict(_probe())


@functools.lru_cache(maxsize=1)
def _probe() -> dict[str, Any]:
    hw: dict[str, Any] = {"hostname": socket.gethostname(), "machine": platform.machine(),
                          "system": platform.system(), "cpus": os.cpu_count(), "cpu_model": _cpu_model(),
                          "memory_gb": _memory_gb(), "gpus": _gpus(), "python": platform.python_version()}
    keys = ("machine", "system", "cpus", "cpu_model", "memory_gb", "gpus")
    hw["fingerprint"] = hashlib.sha256(json.dumps([hw[k] for k in keys]).encode()).hexdigest()[:12]
    return hw
