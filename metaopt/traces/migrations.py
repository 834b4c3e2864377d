"""Named, ordered schema migrations, run by the store when it opens.

Each table has one owner module: it declares a `Schema` (the tables it owns, its part of each named
migration, the read-only modules allowed SQL over them), defines the tables' records and holds
every write to them (tests/test_table_owners.py checks it). SCHEMAS below is the one list of
owners; plugins add theirs through the `metaopt.schemas` entry-point group. A migration name is
global: an owner adds its DDL to a migration under that name, and a store records each name once
(`schema_migrations`), so new names sort after the applied ones. Append; never edit or reorder
applied migrations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from metaopt.core.errors import StoreError
from metaopt.core.registry import Registry
from metaopt.traces.records import Record


@dataclass(frozen=True)
class Schema:
    """What one owner module declares about its tables."""

    tables: tuple[str, ...]
    """The tables this module owns: their DDL, record types and writes live in it."""
    migrations: tuple[tuple[str, str], ...]
    """(migration name, this owner's DDL in it), in order."""
    readers: tuple[str, ...] = ()
    """Other modules (dotted names) that may hold read-only SQL over these tables."""
    reader_optional: tuple[str, ...] = ()
    """Migrations that only add a table whose readers check it exists (Store.has_table): a store
    lacking them still opens read-only (the explorer, `metaopt traces`), without the table; the
    next read-write open applies them."""


SCHEMAS = Registry("table owner", "metaopt.schemas", {
    "store": "metaopt.traces.migrations:SCHEMA",
    "traces": "metaopt.traces.tables:SCHEMA",
    "experiments": "metaopt.meta_agent.records:SCHEMA",
    "bilevel": "metaopt.meta_agent.search.bilevel.records:SCHEMA",
    "diagnose": "metaopt.traces.diagnose:SCHEMA",
    "meta_bench": "metaopt.meta_bench.results:SCHEMA",
})
"""Owner name -> "module:SCHEMA". Pieces of one migration run in this order."""

SCHEMA = Schema(tables=("schema_migrations",), migrations=())
"""The runner's own bookkeeping table, created when a store opens."""


class AppliedMigration(Record, table="schema_migrations"):
    name: str
    applied_at: datetime


def schemas() -> dict[str, Schema]:
    """Owner name -> its Schema, every owner imported now."""
    return {name: SCHEMAS.load(name) for name in SCHEMAS.names()}


def migrations() -> list[tuple[str, str]]:
    """(name, DDL) of every migration in order, each owner's part joined under its name."""
    parts: dict[str, list[str]] = {}
    for schema in schemas().values():
        for name, sql in schema.migrations:
            parts.setdefault(name, []).append(sql)
    return [(name, "\n".join(parts[name])) for name in sorted(parts)]


def __getattr__(name: str) -> Any:  # MIGRATIONS is computed on use: owners sit above this package
    if name == "MIGRATIONS":
        return migrations()
    raise AttributeError(name)


def migrate(con: duckdb.DuckDBPyConnection, path: Path, read_only: bool, now: datetime) -> None:
    """Apply the migrations `con` lacks. Raises StoreError when the store is not ours, was written by a
    newer metaopt, or needs a migration while opened read-only."""
    if not read_only:
        con.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    try:
        applied = {r[0] for r in con.execute("SELECT name FROM schema_migrations").fetchall()}
    except duckdb.Error:
        raise StoreError(f"{path} is not a metaopt store (no schema_migrations table)") from None
    known = migrations()
    optional = {name for schema in schemas().values() for name in schema.reader_optional}
    unknown = sorted(applied - {name for name, _ in known})
    if unknown:
        raise StoreError(f"store {path} was written by a newer metaopt (unknown migration {unknown[0]}); upgrade metaopt")
    for name, sql in known:
        if name in applied or (read_only and name in optional):
            continue
        if read_only:
            raise StoreError(f"store {path} needs migration {name}; open it once read-write")
        con.execute("BEGIN TRANSACTION")
        con.execute(sql)
        row = AppliedMigration(name=name, applied_at=now).to_row()
        con.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", list(row.values()))
        con.execute("COMMIT")
