"""The store: one DuckDB file holding every run, trial (and later span, candidate, decision).

One process writes it (DuckDB allows no second process while it is open). The schema moves only
by the named migrations in traces/migrations.py, recorded in `schema_migrations`; a store that
holds a migration this version does not know was written by a newer metaopt and is refused.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb

from traces.migrations import MIGRATIONS

DEFAULT_PATH = Path(".metaopt/metaopt.duckdb")


class StoreError(Exception):
    """The store file cannot be used (corrupt, locked, newer schema). The message is one line."""


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


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

    # -- trials ---------------------------------------------------------------------------
    def add_trial(self, row: dict[str, Any]) -> None:
        """Append one finished trial. Keys are `trials` columns; missing ones are NULL."""
        cols = self._columns("trials")
        values = []
        for c in cols:
            v = row.get(c)
            values.append(json.dumps(v, default=str) if isinstance(v, (dict, list)) else v)
        ap = self.con.appender("trials")
        ap.append_row(*values)
        ap.flush()

    def trials(self, run_id: str) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM trials WHERE run_id = ? ORDER BY task_id, attempt", [run_id])

    # -- generic --------------------------------------------------------------------------
    def rows(self, sql: str, params: list | None = None) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, params or [])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def _columns(self, table: str) -> list[str]:
        cache = self.__dict__.setdefault("_cols", {})
        if table not in cache:
            cache[table] = [r[0] for r in self.con.execute(f"DESCRIBE {table}").fetchall()]
        return cache[table]

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
