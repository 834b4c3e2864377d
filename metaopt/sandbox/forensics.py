"""A container's files and changes as the Docker daemon sees them, read from outside.

Nothing here runs a process in the container: `changes` is `docker diff` (the container's
writable layer against its image), `read_entry` and `read_tree` are `get_archive` streams
hashed on the host with size limits (a reward file that is a FIFO, a directory or 10 GB is an
answer, never a hang or a crash), and `Pristine` reads the same paths from a created, never
started container of the same image: the state before anyone touched it.
"""

from __future__ import annotations

import atexit
import hashlib
import posixpath
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import docker.errors
import requests

from metaopt.core.errors import SandboxError

if TYPE_CHECKING:
    from metaopt.sandbox.docker_sandbox import DockerSandbox

# Go's os.FileMode type bits, as the daemon reports them in the archive stat header.
_DIR, _LINK, _DEVICE, _PIPE, _SOCKET, _CHAR = 1 << 31, 1 << 27, 1 << 26, 1 << 25, 1 << 24, 1 << 21
KIND = {"A": "added", "C": "changed", "D": "deleted"}


@dataclass(frozen=True)
class Entry:
    """One path. kind: file | dir | link | fifo | socket | device | missing. `data` is the content
    of a file no larger than the read limit; `sha256` hashes a file's content (up to the hash
    limit) or a link's target."""

    path: str
    kind: str
    size: int = 0
    mode: int = 0
    link: str = ""
    data: bytes | None = None
    sha256: str | None = None
    md5: str | None = None

    @property
    def text(self) -> str:
        return (self.data or b"").decode("utf-8", "replace")


def changes(sb: DockerSandbox) -> list[tuple[str, str]]:
    """(A | C | D, path) for every path the container added, changed or deleted vs its image."""
    try:
        rows = sb.api.diff(sb.id) or []
    except (docker.errors.APIError, requests.exceptions.RequestException) as e:
        raise SandboxError(f"sandbox {getattr(sb, 'name', sb.id)}: docker diff failed: {e}") from None
    return [("CAD"[r["Kind"]] if r["Kind"] in (0, 1, 2) else "C", r["Path"]) for r in rows]


def read_entry(sb: Any, path: str, *, limit: int = 1 << 20, hash_limit: int = 256 << 20) -> Entry:
    """The entry at `path` (not following a final symlink). Never reads more than `hash_limit`
    bytes; never raises for what the path is (missing -> kind 'missing')."""
    return _read(sb.api, sb.id, path, limit, hash_limit)


def read_tree(sb: DockerSandbox, path: str, *, limit: int = 64 << 20) -> tuple[dict[str, Entry], bool]:
    """Every entry under the directory `path`, keyed by path relative to it ('' = the top), and
    whether the tree was read whole (False: it is larger than `limit` bytes)."""
    return _tree(sb.api, sb.id, path, limit)


def _tree(api: Any, cid: str, path: str, limit: int) -> tuple[dict[str, Entry], bool]:
    out: dict[str, Entry] = {}
    try:
        chunks, _stat = api.get_archive(cid, path)
    except docker.errors.NotFound:
        return out, True
    except (docker.errors.APIError, requests.exceptions.RequestException) as e:
        raise SandboxError(f"cannot read {path} from the sandbox: {e}") from None
    budget = [limit]
    try:
        with tarfile.open(fileobj=_Chunks(chunks, budget), mode="r|") as tar:  # pyright: ignore[reportCallIssue, reportArgumentType] - stream mode only reads; typeshed wants a whole file API
            for m in tar:
                rel = m.name.split("/", 1)[1] if "/" in m.name else ""
                full = posixpath.join(path, rel) if rel else path
                out[rel] = _member(tar, m, full, limit, limit)
    except (tarfile.TarError, OSError, EOFError):
        return out, False
    finally:
        _close(chunks)
    return out, budget[0] > 0


class Pristine:
    """Paths of an image as they were before any container ran: read from a created (never
    started) container of the image, one per image per daemon, removed at exit."""

    _lock = threading.Lock()
    _cache: ClassVar[dict[tuple[int, str], Pristine]] = {}

    def __init__(self, api: Any, image: str, labels: dict[str, str]):
        self.api, self.image, self._labels = api, image, labels
        self._id: str | None = None
        self._entries: dict[tuple[str, int], Entry] = {}
        self._mu = threading.Lock()

    @classmethod
    def of(cls, sb: DockerSandbox, labels: dict[str, str] | None = None) -> Pristine:
        """The pristine view of `sb`'s image on `sb`'s daemon."""
        image = sb.spec.image
        key = (id(sb.api), image)
        with cls._lock:
            p = cls._cache.get(key)
            if p is None:
                p = cls._cache[key] = cls(sb.api, image, labels or {"metaopt.managed": "true"})
        return p

    def entry(self, path: str, *, limit: int = 1 << 20) -> Entry:
        key = (path, limit)
        with self._mu:
            if key not in self._entries:
                for attempt in (0, 1):
                    try:
                        self._entries[key] = _read(self.api, self._container(), path, limit, 256 << 20)
                        break
                    except SandboxError:
                        if attempt:
                            raise
                        self._id = None  # pruned under us: create it again
            return self._entries[key]

    def exists(self, path: str) -> bool:
        return self.entry(path, limit=0).kind != "missing"

    def tree(self, path: str, *, limit: int = 64 << 20) -> tuple[dict[str, Entry], bool]:
        """read_tree of the pristine image (not cached)."""
        return _tree(self.api, self._container(), path, limit)

    def _container(self) -> str:
        if self._id is None:
            try:
                cid: str = self.api.create_container(
                    self.image, command=["true"], labels={**self._labels, "metaopt.pristine": "1"},
                    network_disabled=True)["Id"]
            except docker.errors.APIError as e:
                raise SandboxError(f"cannot create a pristine container of {self.image}: {e}") from None
            self._id = cid
            _created.append((self.api, cid))
            return cid
        return self._id


    @classmethod
    def release(cls) -> None:
        """Remove the pristine containers this process created, now, keeping what was read from
        them (a later read creates the container again). For processes that are killed rather
        than exit, such as Ray workers: their atexit never runs."""
        with cls._lock:
            views = list(cls._cache.values())
        for p in views:
            with p._mu:
                p._id = None
        _remove_pristine()


_created: list[tuple[Any, str]] = []


@atexit.register
def _remove_pristine() -> None:
    while _created:
        api, cid = _created.pop()
        try:
            api.remove_container(cid, force=True, v=True)
        except Exception:  # noqa: BLE001, S110 - gone already (pruned), or the daemon is down at exit
            pass


def _read(api: Any, cid: str, path: str, limit: int, hash_limit: int) -> Entry:
    try:
        chunks, stat = api.get_archive(cid, path)
    except docker.errors.NotFound as e:
        if "No such container" in str(e):
            raise SandboxError(f"container {cid[:12]} is gone") from None
        return Entry(path, "missing")
    except (docker.errors.APIError, requests.exceptions.RequestException) as e:
        raise SandboxError(f"cannot read {path} from container {cid[:12]}: {e}") from None
    mode = int(stat.get("mode") or 0)
    size = int(stat.get("size") or 0)
    kind = _kind(mode)
    if kind != "file":  # a directory archive would stream the whole tree: never read it
        _close(chunks)
        link = stat.get("linkTarget") or ""
        return Entry(path, kind, size, mode & 0o7777, link,
                     sha256=hashlib.sha256(link.encode()).hexdigest() if kind == "link" else None)
    if size > hash_limit:
        _close(chunks)
        return Entry(path, kind, size, mode & 0o7777)
    budget = [hash_limit + (1 << 20)]
    try:
        with tarfile.open(fileobj=_Chunks(chunks, budget), mode="r|") as tar:  # pyright: ignore[reportCallIssue, reportArgumentType] - stream mode only reads; typeshed wants a whole file API
            for m in tar:
                return _member(tar, m, path, limit, hash_limit)
    except (tarfile.TarError, OSError, EOFError):  # cut off by the budget, or the stream broke
        return Entry(path, "file", size, mode & 0o7777)
    finally:
        _close(chunks)
    return Entry(path, "missing")


def _member(tar: tarfile.TarFile, m: tarfile.TarInfo, path: str, limit: int, hash_limit: int) -> Entry:
    if m.isdir():
        return Entry(path, "dir", 0, m.mode)
    if m.issym() or m.islnk():
        return Entry(path, "link", 0, m.mode, m.linkname, sha256=hashlib.sha256(m.linkname.encode()).hexdigest())
    if m.isfifo():
        return Entry(path, "fifo", 0, m.mode)
    if not m.isfile():
        return Entry(path, "device", 0, m.mode)
    if m.size > hash_limit:
        return Entry(path, "file", m.size, m.mode)
    f = tar.extractfile(m)
    h, h5, keep, n = hashlib.sha256(), hashlib.md5(), bytearray(), 0
    while f is not None and (block := f.read(1 << 20)):
        h.update(block)
        h5.update(block)
        if n < limit:
            keep += block[: limit - n]
        n += len(block)
    return Entry(path, "file", m.size, m.mode, data=bytes(keep) if m.size <= limit else None,
                 sha256=h.hexdigest(), md5=h5.hexdigest())


def _kind(mode: int) -> str:
    if mode & _DIR:
        return "dir"
    if mode & _LINK:
        return "link"
    if mode & _PIPE:
        return "fifo"
    if mode & _SOCKET:
        return "socket"
    if mode & (_DEVICE | _CHAR):
        return "device"
    return "file"


def _close(chunks: Any) -> None:
    close = getattr(chunks, "close", None)
    if close:
        close()


class _Chunks:
    """A read()-able view of the SDK's chunk generator that stops after `budget` bytes."""

    def __init__(self, chunks: Iterator[bytes], budget: list[int]):
        self._it, self._buf, self._pos, self._budget = iter(chunks), bytearray(), 0, budget

    def read(self, n: int = -1) -> bytes:
        while (n < 0 or len(self._buf) - self._pos < n) and self._budget[0] > 0:
            try:
                chunk = next(self._it)
            except StopIteration:
                break
            self._budget[0] -= len(chunk)
            if self._pos:
                del self._buf[: self._pos]
                self._pos = 0
            self._buf += chunk
        end = len(self._buf) if n < 0 else min(len(self._buf), self._pos + n)
        out = bytes(self._buf[self._pos : end])
        self._pos = end
        return out
