"""The wheels baked into the metaopt base image (see sandbox.base_image).

`download_wheels` runs `pip download` on the host, for CPython 3.11 on this machine's architecture,
so the image never needs PyPI; `uv_binaries` takes the uv and uvx executables out of the uv wheel.
Failures are RuntimeErrors with a one-line message naming the cause.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import zipfile
from pathlib import Path

# Wheel sets, one `pip download` each (two pytest pins cannot share one resolution).
# colorama is a win32-only dependency of pytest: `uv add` locks for every platform, so it must be
# resolvable too even though it is never installed on Linux.
WHEEL_SETS: tuple[tuple[str, ...], ...] = (
    ("uv",),
    ("pytest==8.4.1", "pytest-json-ctrf==0.3.5", "colorama"),
    ("pytest==8.4.2", "pytest-json-ctrf==0.3.5"),
)


def _pip_platforms() -> list[str]:
    arch = platform.machine() or "x86_64"
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch.lower(), arch)
    return [f"manylinux_2_17_{arch}", f"manylinux2014_{arch}", f"manylinux_2_28_{arch}"]


def download_wheels(dest: Path) -> None:
    """`pip download` each wheel set for CPython 3.11 on this machine's architecture (in parallel)."""
    base = [
        os.environ.get("METAOPT_PIP_PYTHON") or _host_python(), "-m", "pip", "download",
        "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
        "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
        "-d", str(dest),
    ]
    for plat in _pip_platforms():
        base += ["--platform", plat]
    procs = [
        (reqs, subprocess.Popen([*base, *reqs], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for reqs in WHEEL_SETS
    ]
    errors = []
    for reqs, proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            lines = [ln.strip() for ln in (err or out).splitlines() if ln.strip()]
            reason = next((ln for ln in reversed(lines) if ln.startswith("ERROR")), lines[-1] if lines else "")
            errors.append(f"pip download {' '.join(reqs)} failed (exit {proc.returncode}): {reason}")
    if errors:
        raise RuntimeError(errors[0])
    if not list(dest.glob("uv-*.whl")):
        raise RuntimeError("pip download failed: no uv wheel was downloaded")


def _host_python() -> str:
    import sys

    return sys.executable or "python3"


def uv_binaries(wheels_dir: Path) -> dict[str, bytes]:
    """The uv and uvx executables from the uv wheel's `uv-*.data/scripts/`."""
    wheel = max(wheels_dir.glob("uv-*.whl"))
    out: dict[str, bytes] = {}
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            m = re.fullmatch(r"uv-[^/]+\.data/scripts/(uvx?)", name)
            if m:
                out[m.group(1)] = zf.read(name)
    if "uv" not in out:
        raise RuntimeError(f"{wheel.name} holds no uv binary under uv-*.data/scripts/")
    return out
