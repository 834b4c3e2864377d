"""Cost of a model call from its Usage and the price table in prices.yaml.

Contract: `cost_usd()` returns None for a model with no known price, never 0, so an unknown
cost is never mistaken for a free call. Users add or override prices with
METAOPT_PRICES=path/to/prices.yaml (same layout as prices.yaml; entries merged per model).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from metaopt.core.errors import ModelConfigError
from metaopt.task_agent.messages import Usage

ENV_PRICES = "METAOPT_PRICES"
_BUILTIN = Path(__file__).with_name("prices.yaml")
_SNAPSHOT = re.compile(r"-\d{8}|-\d{4}-\d{2}-\d{2}")
_FIELDS = ("input", "output", "cache_read", "cache_write")


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float


def _read(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ModelConfigError(f"cannot read prices file {path}: {exc}") from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise ModelConfigError(f"prices file {path} has no 'models' mapping")
    for key, entry in models.items():
        if not isinstance(entry, dict) or set(entry) - set(_FIELDS):
            raise ModelConfigError(f"prices file {path}: models.{key} must map {', '.join(_FIELDS)} "
                                   f"to USD per million tokens, got {entry!r}")
    return {str(k): dict(v) for k, v in models.items()}


@functools.lru_cache(maxsize=8)
def _table(override: str | None) -> dict[str, Price]:
    merged = _read(_BUILTIN)
    if override:
        for key, entry in _read(Path(override)).items():
            merged[key] = {**merged.get(key, {}), **entry}
    if missing := [key for key, e in merged.items() if "input" not in e or "output" not in e]:
        raise ModelConfigError(f"prices for {', '.join(missing)} need at least input and output")
    return {
        key: Price(input=float(e["input"]), output=float(e["output"]),
                   cache_read=float(e.get("cache_read", e["input"])),
                   cache_write=float(e.get("cache_write", e["input"])))
        for key, e in merged.items()
    }


def price_for(model: str) -> Price | None:
    """The price of `model` ("claude-sonnet-4-5-20250929" or "anthropic/claude-sonnet-4-5"): a
    key equal to the bare name, or the name is the key plus a date snapshot suffix. None otherwise.
    """
    bare = model.split("/", 1)[1] if "/" in model else model
    table = _table(os.environ.get(ENV_PRICES) or None)
    # Only a date may follow the key: "gpt-5" must not price "gpt-5-pro", nor "claude-opus-4"
    # a future "claude-opus-4-7"; a wrong price is worse than an unknown one.
    matches = [key for key in table if bare == key or (
        bare.startswith(key) and _SNAPSHOT.fullmatch(bare[len(key):]))]
    return table[max(matches, key=len)] if matches else None


def cost_usd(model: str, usage: Usage) -> float | None:
    """USD for one call; `usage.input_tokens` includes cached tokens (OTel convention)."""
    price = price_for(model)
    if price is None:
        return None
    uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    total = (uncached * price.input + usage.cache_read_tokens * price.cache_read
             + usage.cache_write_tokens * price.cache_write + usage.output_tokens * price.output)
    return total / 1_000_000
