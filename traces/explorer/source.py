"""How the explorer reads a store that a `metaopt run` or `eval` may be writing right now.

DuckDB lets one process write a file and no other process open it meanwhile. So:
- no writer: the explorer opens the file read-only and keeps that connection only while you
  browse: it closes it after `idle_s` without a request (opening costs ~60 ms on a large store,
  too much to pay per request), so a run started later finds the file free. A run started
  within those seconds fails with DuckDB's lock error naming this process; start it again.
- a writer holds the file: requests read a snapshot, a copy of the file and its write-ahead log
  taken when they change (at most every `refresh_s`), kept only if neither changed while it was
  copied, opened read-only (DuckDB replays the copied log in memory). The page says so.
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
    newer-schema or unreadable store. Thread-safe: each request gets its own cursor."""

    def __init__(self, path: Path | str, refresh_s: float = 2.0, idle_s: float = 2.0):
        self.path = Path(path)
        self.refresh_s, self.idle_s = refresh_s, idle_s
        self._lock = threading.Lock()  # guards the cached connection and the snapshot
        self._dir = Path(tempfile.mkdtemp(prefix="metaopt-ui-"))
        self._snap: tuple[Path, tuple, float] | None = None  # (file, source stamp, taken at)
        self._n = 0
        self._cached: tuple[Store, str | None, Path] | None = None  # (store, note, file it reads)
        self._retired: list[tuple[Store, str | None, Path]] = []
        self._users, self._last = 0, 0.0
        self._closer: threading.Timer | None = None

    @contextmanager
    def open(self) -> Iterator[tuple[Store, str | None]]:
        with self._lock:
            base, note = self._connection()
            self._users += 1
        cur = base.con.cursor()
        view = Store.__new__(Store)  # a Store over this request's cursor: same helpers, own state
        view.path, view.con = base.path, cur
        try:
            yield view, note
        finally:
            cur.close()
            with self._lock:
                self._users -= 1
                self._last = time.monotonic()
                if self._users == 0 and self._retired:
                    self._drop()
                self._schedule_close()

    def _connection(self) -> tuple[Store, str | None]:
        if self._cached and self._cached[2] != self.path and self._snapshot_due():
            self._drop()  # a newer snapshot, or the file itself if the writer has finished
        if self._cached:
            return self._cached[0], self._cached[1]
        try:
            store, note, file = Store(self.path, read_only=True), None, self.path
        except StoreError as e:
            if not _is_locked(e):
                raise
            file, taken = self._snapshot_locked()
            store, note = Store(file, read_only=True), self._note(taken)
        self._cached = (store, note, file)
        return store, note

    def _snapshot_due(self) -> bool:
        assert self._snap is not None
        return time.time() - self._snap[2] >= self.refresh_s and _stamp(self.path) != self._snap[1]

    def _note(self, taken: float) -> str:
        return (f"a run is writing {self.path}: showing a snapshot taken at "
                f"{time.strftime('%H:%M:%S', time.localtime(taken))}")

    def _schedule_close(self) -> None:
        if self._closer is None and self._cached is not None:
            self._closer = threading.Timer(self.idle_s, self._close_if_idle)
            self._closer.daemon = True
            self._closer.start()

    def _close_if_idle(self) -> None:
        with self._lock:
            self._closer = None
            if self._users == 0 and time.monotonic() - self._last >= self.idle_s * 0.9:
                self._drop()
            else:
                self._schedule_close()

    def _drop(self) -> None:
        """Retire the cached connection; it closes (and its snapshot goes) once no request uses it."""
        if self._cached:
            self._retired.append(self._cached)
            self._cached = None
        if self._users == 0:
            for store, _, file in self._retired:
                store.close()
                if file != self.path:
                    self._remove(file)
            self._retired = []

    def _snapshot_locked(self) -> tuple[Path, float]:
        """A fresh snapshot (file, taken at). Caller holds _lock."""
        now = time.time()
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
        with self._lock:
            self._drop()
        shutil.rmtree(self._dir, ignore_errors=True)
