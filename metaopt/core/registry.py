"""Implementations by short name: one registry shape for models, proposers, strategies,
benchmarks, scorers, agents, executors, export formats and bilevel mechanisms.

A registry maps names to "module:attr" targets, imported only when asked for (nothing happens at
import time). Plugins add names through one entry-point group per kind (`metaopt.models`,
`metaopt.proposers`, ...); a plugin cannot replace a built-in. An unknown name raises
UnknownName listing the known ones.

    STRATEGIES = Registry("strategy", "metaopt.strategies", {"greedy": "metaopt.meta_agent.search.strategies.greedy:Greedy"})
    STRATEGIES.load("greedy")()   # the class, then an instance
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Any

from metaopt.core.errors import UnknownName


class Registry:
    def __init__(self, kind: str, group: str, builtins: dict[str, str],
                 error: Callable[[str, str, list[str]], UnknownName] = UnknownName, *,
                 field: str | None = None) -> None:
        """`error(kind, name, known)` builds the exception for an unknown name; `field` (e.g.
        "--agent") is the option a user names it with, put on that error for the CLI's line."""
        self.kind, self.group, self.builtins, self.error = kind, group, dict(builtins), error
        self.field = field

    def targets(self) -> dict[str, str]:
        """Name -> "module:attr": built-ins first, then plugins (which cannot replace a built-in)."""
        found = {ep.name: ep.value for ep in entry_points(group=self.group)}
        return {**self.builtins, **{k: v for k, v in found.items() if k not in self.builtins}}

    def names(self) -> list[str]:
        return list(self.targets())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.builtins or name in self.targets())

    def target(self, name: str) -> str:
        """The "module:attr" of `name`. Raises UnknownName."""
        target = self.builtins.get(name) or self.targets().get(name)
        if target is None:
            e = self.error(self.kind, name, self.names())
            e.field = e.field or self.field
            raise e
        return target

    def load(self, name: str) -> Any:
        """The object registered as `name`, imported now. Raises UnknownName."""
        module, _, attr = self.target(name).partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj
