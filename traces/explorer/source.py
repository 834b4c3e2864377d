"""How the explorer reads a store that a `metaopt run` or `eval` may be writing right now.

DuckDB lets one process write a file and no other process open it meanwhile, and a reader that
keeps the file open would stop a run from starting. So the explorer never holds the file:
each request opens it read-only and closes it at once. When a writer holds the file, the request
reads a snapshot instead: a copy of the file and its write-ahead log, taken when they change (at
most every `refresh_s`), kept only if neither changed while it was copied, and opened read-only
(DuckDB replays the copied log in memory). The page says when it shows a snapshot.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from traces.store import Store, StoreError


def _is_locked(e: StoreError) -> bool:
    return "lock" in str(e).lower()


def _stamp(path: Path) -> tuple:
    """Size and mtime of the file and its WAL: what changes when a writer commits."""
    out = []
    for p in (path, Path(str(path) + ".wal")):
        try:
            st = p.stat()
            out.append((st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            out.append(None)
    return tuple(out)


class Source:
    """Opens the store for one request: `with source.open() as (store, note): ...`.

    `note` is None when the file itself was read, else a sentence saying the data are a
    snapshot and when it was taken. Raises StoreError (one line) for a missing, corrupt,
    newer-schema or unreadable store."""

    def __init__(self, path: Path | str, refresh_s: float = 2.0):
        self.path = Path(path)
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._dir = Path(tempfile.mkdtemp(prefix="metaopt-ui-"))
        self._snap: tuple[Path, tuple, float] | None = None  # (file, source stamp, taken at)
        self._n = 0

    @contextmanager
    def open(self) -> Iterator[tuple[Store, str | None]]:
        try:
            store, note = Store(self.path, read_only=True), None
        except StoreError as e:
            if not _is_locked(e):
                raise
            snap, taken = self._snapshot()
            store = Store(snap, read_only=True)
            note = (f"a run is writing {self.path}: showing a snapshot taken at "
                    f"{time.strftime('%H:%M:%S', time.localtime(taken))}")
        try:
            yield store, note
        finally:
            store.close()

    def _snapshot(self) -> tuple[Path, float]:
        with self._lock:  # one copy at a time; other requests reuse it
            now = time.time()
            if self._snap and now - self._snap[2] < self.refresh_s:
                return self._snap[0], self._snap[2]
            if self._snap and _stamp(self.path) == self._snap[1]:
                self._snap = (self._snap[0], self._snap[1], now)
                return self._snap[0], now
            for _ in range(20):  # a commit during the copy would tear it: copy again
                before = _stamp(self.path)
                self._n += 1
                dest = self._dir / f"snap-{self._n}.duckdb"
                shutil.copyfile(self.path, dest)
                wal = Path(str(self.path) + ".wal")
                if before[1] is not None:
                    try:
                        shutil.copyfile(wal, str(dest) + ".wal")
                    except FileNotFoundError:  # checkpointed meanwhile: the stamps differ
                        pass
                if _stamp(self.path) == before:
                    break
                self._remove(dest)
                time.sleep(0.05)
            else:
                raise StoreError(f"store {self.path} is being written too fast to copy; try again")
            if self._snap:
                self._remove(self._snap[0])  # readers that still have it open keep their handle
            self._snap = (dest, before, now)
            return dest, now

    @staticmethod
    def _remove(p: Path) -> None:
        for f in (p, Path(str(p) + ".wal")):
            try:
                os.remove(f)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
