"""The store: one DuckDB file holding every run, trial (and later span, candidate, decision).

One process writes it (DuckDB allows no second process while it is open). Threads share it: the
thread that opened the store uses its connection, any other thread a cursor of its own (a DuckDB
connection is not safe to share between threads; its cursors are). The schema moves only
by the named migrations each table's owner declares (traces/migrations.py runs them), recorded in
`schema_migrations`; a store that holds a migration this version does not know was written by a
newer metaopt and is refused. Records are written and read generically here (`insert`, `select`);
SQL naming a table lives with its owner (tests/test_table_owners.py).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self, TypeVar

import duckdb

from metaopt.core.errors import StoreError
from metaopt.traces import tables
from metaopt.traces.migrations import migrate
from metaopt.traces.records import Record
from metaopt.traces.tables import RunRecord

R = TypeVar("R", bound=Record)

DEFAULT_PATH = Path(".metaopt/metaopt.duckdb")


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Store:
    def __init__(self, path: Path | str = DEFAULT_PATH, *, read_only: bool = False):
        self.path = Path(path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.exists():
            raise StoreError(f"store {self.path} does not exist")
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as e:
            raise StoreError(f"cannot open store {self.path}: {str(e).splitlines()[0]}") from None
        self._owner, self._local, self._cursors = threading.get_ident(), threading.local(), []
        self._migrate(read_only)

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection for the calling thread: the store's own in the thread that opened it,
        a cursor of it (made once per thread) in any other."""
        if threading.get_ident() == self._owner:
            return self._con
        cur = getattr(self._local, "cur", None)
        if cur is None:
            cur = self._local.cur = self._con.cursor()
            self._cursors.append(cur)
        return cur

    @con.setter
    def con(self, value: duckdb.DuckDBPyConnection) -> None:
        """A Store over a connection of the caller's (e.g. one request's cursor), owned by this thread."""
        self._con, self._owner, self._local, self._cursors = value, threading.get_ident(), threading.local(), []

    def _migrate(self, read_only: bool) -> None:
        migrate(self.con, self.path, read_only, now())

    # -- runs (traces.tables owns the table) ------------------------------------------------
    def begin_run(self, run_id: str, *, benchmark: str, agent: str, dataset: str | None, args: dict[str, Any]) -> None:
        tables.begin_run(self.con, RunRecord(run_id=run_id, benchmark=benchmark, agent=agent, dataset=dataset,
                                             args=args, started_at=now(), status="running"))

    def end_run(self, run_id: str, status: str, *, unless_finished: bool = False) -> None:
        tables.end_run(self.con, run_id, status, now(), unless_finished=unless_finished)

    # -- typed records --------------------------------------------------------------------
    def insert(self, record: Record) -> None:
        """Write one record into its table by column name (see traces.records)."""
        row = record.to_row()
        cols = ", ".join(f'"{c}"' for c in row)
        self.con.execute(f"INSERT INTO {record.table} ({cols}) VALUES ({', '.join('?' * len(row))})",
                         list(row.values()))

    def select(self, model: type[R], where: str = "true", params: list | None = None,
               order: str | None = None) -> list[R]:
        """Rows of `model`'s table matching `where`, as `model` records."""
        cols = ", ".join(f'"{c}"' for c in model.columns())
        sql = f"SELECT {cols} FROM {model.table} WHERE {where}" + (f" ORDER BY {order}" if order else "")
        return [model.model_validate(r) for r in self.rows(sql, params)]

    def has_table(self, table: str) -> bool:
        """Whether the store has `table` (a reader-optional migration's may be missing read-only)."""
        return bool(self.con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [table]).fetchall())

    def columns(self, table: str) -> list[str]:
        return [r[0] for r in self.con.execute(f"DESCRIBE {table}").fetchall()]

    # -- generic --------------------------------------------------------------------------
    def rows(self, sql: str, params: list | None = None) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, params or [])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def close(self) -> None:
        for cur in self._cursors:
            cur.close()
        self._con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
