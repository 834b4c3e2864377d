"""How the explorer reads a store that a `metaopt run` or `eval` may be writing right now.

DuckDB lets one process write a file and no other process open it meanwhile; even a read-only
reader that keeps the file open stops a run from starting. So the explorer never opens the
store itself: it reads a snapshot, a copy of the file and its write-ahead log kept only if
neither changed while it was copied, opened read-only (DuckDB replays the copied log in memory).
The first request waits for the first copy; after that, when the store has changed and the last
copy is older than the refresh interval, a background thread takes a new one while requests keep
reading the current snapshot. The interval is `refresh_s`, stretched to 10x the last copy's time
so copying a large store never takes more than a tenth of the time. While the store changes,
pages say which moment they show. The cost is disk: one copy of the store.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from metaopt.traces.store import Store, StoreError


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


@dataclass
class _Snapshot:
    store: Store
    file: Path
    stamp: tuple  # the source's stamp when copied
    taken: float  # time.time() of the copy
    users: int = 0


class Source:
    """Opens the store for one request: `with source.open() as (store, note): ...`.

    `note` is None when the snapshot is the store as it is now, else a sentence saying the store
    is being written and when the snapshot was taken. Raises StoreError (one line, naming the
    store's own path) for a missing, corrupt or newer-schema store. Thread-safe: each request
    reads through its own cursor."""

    def __init__(self, path: Path | str, refresh_s: float = 2.0):
        self.path = Path(path)
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._dir = Path(tempfile.mkdtemp(prefix="metaopt-ui-"))
        self._names = itertools.count(1)  # next() is atomic: a refresh and a background copy may overlap
        self._current: _Snapshot | None = None
        self._retired: list[_Snapshot] = []
        self._copy_s = 0.0
        self._refreshing = False

    @contextmanager
    def open(self) -> Iterator[tuple[Store, str | None]]:
        with self._lock:
            if self._current is None:
                self._current = self._take()  # the first request waits for the first copy
            snap = self._current
            snap.users += 1
            fresh = _stamp(self.path) == snap.stamp
            if not fresh and not self._refreshing and time.time() - snap.taken >= max(self.refresh_s, 10 * self._copy_s):
                self._refreshing = True
                threading.Thread(target=self._refresh, daemon=True).start()
        cur = snap.store.con.cursor()
        view = Store.__new__(Store)  # a Store over this request's cursor: same helpers, own state
        view.path, view.con = self.path, cur
        note = None if fresh else (f"{self.path} is being written: showing a snapshot taken at "
                                   f"{time.strftime('%H:%M:%S', time.localtime(snap.taken))}")
        try:
            yield view, note
        finally:
            cur.close()
            with self._lock:
                snap.users -= 1
                self._close_retired()

    def refresh(self) -> None:
        """Take a new snapshot now, whatever its age (the page's "refresh" button). Raises
        StoreError when the store cannot be copied or opened; the current snapshot stays then."""
        new = self._take()
        with self._lock:
            if self._current is not None:
                self._retired.append(self._current)
            self._current = new
            self._close_retired()

    def _refresh(self) -> None:
        try:
            new = self._take()
        except StoreError:
            new = None  # keep serving the last good snapshot; the next request tries again
        with self._lock:
            self._refreshing = False
            if new is not None:
                if self._current is not None:
                    self._retired.append(self._current)
                self._current = new
                self._close_retired()

    def _close_retired(self) -> None:
        """Close snapshots no request reads any more (caller holds _lock)."""
        for snap in [s for s in self._retired if s.users == 0]:
            snap.store.close()
            self._remove(snap.file)
            self._retired.remove(snap)

    def _take(self) -> _Snapshot:
        """Copy the store and open the copy, or raise StoreError naming the store's own path."""
        if not self.path.exists():
            raise StoreError(f"store {self.path} does not exist")
        t0 = time.monotonic()
        for _ in range(20):  # a commit during the copy would tear it: copy again
            before = _stamp(self.path)
            dest = self._dir / f"snap-{next(self._names)}.duckdb"
            shutil.copyfile(self.path, dest)
            if before[1] is not None:
                try:
                    shutil.copyfile(str(self.path) + ".wal", str(dest) + ".wal")
                except FileNotFoundError:  # checkpointed meanwhile: the stamps differ
                    pass
            if _stamp(self.path) == before:
                break
            self._remove(dest)
            time.sleep(0.05)
        else:
            raise StoreError(f"store {self.path} changes too fast to copy; try again")
        self._copy_s = time.monotonic() - t0
        try:
            store = Store(dest, read_only=True)
        except StoreError as e:
            self._remove(dest)
            raise StoreError(str(e).replace(str(dest), str(self.path))) from None
        return _Snapshot(store, dest, before, time.time())

    @staticmethod
    def _remove(p: Path) -> None:
        for f in (p, Path(str(p) + ".wal")):
            try:
                os.remove(f)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        with self._lock:
            for snap in [self._current, *self._retired]:
                if snap is not None:
                    snap.store.close()
            self._current, self._retired = None, []
        shutil.rmtree(self._dir, ignore_errors=True)
