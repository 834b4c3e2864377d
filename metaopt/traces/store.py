"""The store: one DuckDB file holding every run, trial (and later span, candidate, decision).

One process writes it (DuckDB allows no second process while it is open). The schema moves only
by the named migrations in traces/migrations.py, recorded in `schema_migrations`; a store that
holds a migration this version does not know was written by a newer metaopt and is refused.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self, TypeVar

import duckdb

from metaopt.core.errors import StoreError
from metaopt.traces.migrations import MIGRATIONS, READER_OPTIONAL
from metaopt.traces.records import Record

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
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as e:
            raise StoreError(f"cannot open store {self.path}: {str(e).splitlines()[0]}") from None
        self._migrate(read_only)

    def _migrate(self, read_only: bool) -> None:
        if not read_only:
            self.con.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
        try:
            applied = {r[0] for r in self.con.execute("SELECT name FROM schema_migrations").fetchall()}
        except duckdb.Error:
            raise StoreError(f"{self.path} is not a metaopt store (no schema_migrations table)") from None
        known = [name for name, _ in MIGRATIONS]
        unknown = sorted(applied - set(known))
        if unknown:
            raise StoreError(
                f"store {self.path} was written by a newer metaopt (unknown migration {unknown[0]}); upgrade metaopt"
            )
        for name, sql in MIGRATIONS:
            if name in applied:
                continue
            if read_only and name in READER_OPTIONAL:
                continue
            if read_only:
                raise StoreError(f"store {self.path} needs migration {name}; open it once read-write")
            self.con.execute("BEGIN TRANSACTION")
            self.con.execute(sql)
            self.con.execute("INSERT INTO schema_migrations VALUES (?, ?)", [name, now()])
            self.con.execute("COMMIT")

    # -- runs -----------------------------------------------------------------------------
    def begin_run(self, run_id: str, *, benchmark: str, agent: str, dataset: str | None, args: dict[str, Any]) -> None:
        self.con.execute(
            "INSERT INTO runs (run_id, benchmark, agent, dataset, args, started_at, status) VALUES (?, ?, ?, ?, ?, ?, 'running')"
            " ON CONFLICT (run_id) DO UPDATE SET status = 'running', finished_at = NULL",  # a resumed run
            [run_id, benchmark, agent, dataset, json.dumps(args, default=str), now()],
        )

    def end_run(self, run_id: str, status: str) -> None:
        self.con.execute("UPDATE runs SET finished_at = ?, status = ? WHERE run_id = ?", [now(), status, run_id])

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
        cols = ", ".join(f'"{c}"' for c in model.model_fields)
        sql = f"SELECT {cols} FROM {model.table} WHERE {where}" + (f" ORDER BY {order}" if order else "")
        return [model.model_validate(r) for r in self.rows(sql, params)]

    def has_table(self, table: str) -> bool:
        """Whether the store has `table` (a READER_OPTIONAL migration's may be missing read-only)."""
        return bool(self.con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [table]).fetchall())

    def columns(self, table: str) -> list[str]:
        return [r[0] for r in self.con.execute(f"DESCRIBE {table}").fetchall()]

    # -- generic --------------------------------------------------------------------------
    def rows(self, sql: str, params: list | None = None) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, params or [])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
