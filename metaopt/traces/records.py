"""Typed rows: a pydantic model per table, written by column name and read back typed.

    class TrialResult(Record, table="trials"): ...
    store.insert(result)                       # INSERT INTO trials (col, ...) VALUES (...)
    store.select(TrialResult, "run_id = ?", [run_id])

A field that is not a column of the table fails the insert loudly (DuckDB names it); a misspelt
field fails when the record is built (`extra="forbid"`). dict and list fields are JSON columns:
encoded on write, decoded on read. Records are JSON round-trippable
(`TrialResult.model_validate_json(r.model_dump_json())`), so they can cross process and machine
boundaries unchanged.
"""

from __future__ import annotations

import json
import typing
from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator


class Record(BaseModel):
    """A row of `table`. Subclasses declare `class X(Record, table="name")`."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    table: ClassVar[str]

    def __init_subclass__(cls, table: str | None = None, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if table is not None:
            cls.table = table

    @classmethod
    def columns(cls) -> list[str]:
        """The table's columns, in field order (a field's alias where it has one, e.g. a column named
        like a BaseModel attribute)."""
        return [f.alias or n for n, f in cls.model_fields.items()]

    @classmethod
    def json_fields(cls) -> frozenset[str]:
        """Fields stored as JSON columns (dicts, lists, nested models)."""
        cached = cls.__dict__.get("_json_fields")
        if cached is None:
            cached = frozenset(n for n, f in cls.model_fields.items() if _is_json(f.annotation))
            cls._json_fields = cached
        return cached

    @model_validator(mode="before")
    @classmethod
    def _decode_json_columns(cls, data: Any) -> Any:
        if isinstance(data, dict):
            js = cls.json_fields() | {f.alias for n, f in cls.model_fields.items() if f.alias and n in cls.json_fields()}
            data = {k: (json.loads(v) if k in js and isinstance(v, str) else v) for k, v in data.items()}
        return data

    def to_row(self) -> dict[str, Any]:
        """Column -> value as DuckDB takes it (JSON columns encoded)."""
        js, fields = self.json_fields(), type(self).model_fields
        row = self.model_dump(mode="python")
        dumped = self.model_dump(mode="json", include=set(js)) if js else {}
        return {(fields[k].alias or k): (json.dumps(dumped[k]) if k in js and v is not None else v)
                for k, v in row.items()}


def _is_json(ann: Any) -> bool:
    for a in _flatten(ann):
        origin = typing.get_origin(a) or a
        if origin in (dict, list, tuple) or (isinstance(origin, type) and issubclass(origin, BaseModel)):
            return True
    return False


def _flatten(ann: Any) -> list[Any]:
    args = typing.get_args(ann)
    if typing.get_origin(ann) in (typing.Union, __import__("types").UnionType):
        return [x for a in args for x in _flatten(a)]
    if typing.get_origin(ann) is typing.Annotated:
        return _flatten(args[0])
    return [ann]


__all__ = ["Record", "datetime"]
