"""Implementations by short name: one registry shape for proposers and strategies, imported lazily."""

from __future__ import annotations

import importlib
from typing import Any


def lookup(registry: dict[str, str], name: str, what: str, error: type[Exception]) -> Any:
    """An instance of registry[name] ("module:Class"); `error` listing the known names otherwise."""
    if name not in registry:
        raise error(f"unknown {what} '{name}' (known: {', '.join(registry)})")
    module, cls = registry[name].split(":")
    return getattr(importlib.import_module(module), cls)()
