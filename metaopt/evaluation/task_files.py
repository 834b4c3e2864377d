"""A Task's host files, shipped to the machine that runs its trial.

A Task names files on the driver's disk (build context, tests, solution, its source dir). A Ray
node may be another machine, so `pack` turns every path a Task names into a few tar archives
(one per top-level path, content-addressed by sha256) and `unpack`, on the node, extracts each
archive once into a local cache and returns the Task with its paths pointing there. Image tags
hash file contents, not paths, so a node reuses an image built from the same files anywhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from metaopt.benchmarks.task import Task

MAX_BYTES = 2 * 2**30  # one archive; a task that names more is refused (one line), not sent
CACHE_ENV = "METAOPT_NODE_CACHE"


def cache_dir() -> Path:
    """Where a node keeps unpacked task files and its locks ($METAOPT_NODE_CACHE)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "metaopt" / "node").expanduser()


def _paths(value: Any, out: list[Path]) -> None:
    if isinstance(value, Path):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _paths(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _paths(v, out)


def _roots(task: Task) -> list[Path]:
    """The fewest existing paths that hold every path the task names."""
    found: list[Path] = []
    _paths(task.model_dump(), found)
    roots: list[Path] = []
    for p in sorted({q.resolve() for q in found if q.exists()}, key=lambda q: len(q.parts)):
        if not any(p.is_relative_to(r) for r in roots):
            roots.append(p)
    return roots


def _tar(root: Path) -> bytes:
    """A reproducible tar of `root` (a dir's contents or one file): sorted, owners zeroed."""
    buf = io.BytesIO()

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(fileobj=buf, mode="w") as tar:
        if root.is_file():
            tar.add(root, arcname=root.name, filter=clean)
        else:
            for path in sorted(root.rglob("*")):
                tar.add(path, arcname=str(path.relative_to(root)), recursive=False, filter=clean)
    if buf.tell() > MAX_BYTES:
        raise ValueError(f"task files under {root} are {buf.tell() / 2**30:.1f} GiB, more than the "
                         f"{MAX_BYTES / 2**30:.0f} GiB one trial may ship to a node")
    return buf.getvalue()


def pack(task: Task) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(a JSON-able payload naming the task and its archives, {sha256: archive bytes})."""
    blobs: dict[str, bytes] = {}
    roots: list[list[str]] = []
    for root in _roots(task):
        data = _tar(root)
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        roots.append([str(root), digest, "file" if root.is_file() else "dir"])
    resolved = Task.model_validate(_map_paths(task.model_dump(), Path.resolve))  # the node matches prefixes only
    return {"task": resolved.model_dump(mode="json"), "roots": roots}, blobs


def _map_paths(value: Any, fn: Callable[[Path], Path]) -> Any:
    """`value` (a model_dump) with fn applied to every Path in it; container paths are str."""
    if isinstance(value, Path):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_paths(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_map_paths(v, fn) for v in value)
    return value


@contextlib.contextmanager
def node_lock(name: str) -> Iterator[None]:
    """An exclusive lock shared by every process on this machine (released if the holder dies)."""
    locks = cache_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def unpack(payload: dict[str, Any], fetch: Callable[[str], bytes]) -> Task:
    """The task of `payload` with its paths under this machine's cache. `fetch(digest)` returns
    an archive's bytes; it is called only for archives not unpacked here before."""
    files = cache_dir() / "files"
    files.mkdir(parents=True, exist_ok=True)
    mapping: list[tuple[Path, Path]] = []
    for root, digest, kind in payload["roots"]:
        dest = files / digest
        if not dest.exists():
            with node_lock(f"files-{digest}"):
                if not dest.exists():  # another process may have unpacked it while we waited
                    tmp = Path(tempfile.mkdtemp(dir=files, prefix=".part-"))
                    try:
                        with tarfile.open(fileobj=io.BytesIO(fetch(digest))) as tar:
                            tar.extractall(tmp, filter="tar")
                        tmp.rename(dest)
                    finally:
                        shutil.rmtree(tmp, ignore_errors=True)
        mapping.append((Path(root), dest / Path(root).name if kind == "file" else dest))

    def local(path: Path) -> Path:
        for root, dest in mapping:
            if path.is_relative_to(root):
                return dest / path.relative_to(root)
        return path  # a path that did not exist on the driver either

    return Task.model_validate(_map_paths(Task.model_validate(payload["task"]).model_dump(), local))
