"""Search mechanisms for the bilevel strategy: the protocol (protocol.py), the built-in mechanisms
(tabu.py, bandit.py, explore.py: one file each, written exactly as a generated one would be) and
the host a mechanism runs in (host_main.py). See protocol.py for the contract.

Mechanisms are looked up by name (core.registry): the built-ins, and plugins through the
`metaopt.mechanisms` entry-point group, each naming a module's `Mechanism` class; the module's
source is the mechanism's source (and identity)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from metaopt.core.registry import Registry

MECHANISMS = Registry("mechanism", "metaopt.mechanisms", {
    "tabu": "metaopt.meta_agent.search.mechanisms.tabu:Mechanism",
    "bandit": "metaopt.meta_agent.search.mechanisms.bandit:Mechanism",
    "explore": "metaopt.meta_agent.search.mechanisms.explore:Mechanism",
})
BUILTINS = tuple(MECHANISMS.builtins)
HERE = Path(__file__).parent


def source_hash(source: str) -> str:
    """A mechanism's identity: the sha256 of its source text."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def builtin_source(name: str) -> str:
    """The source of the registered mechanism `name` (its module's file). Raises UnknownName."""
    spec = importlib.util.find_spec(MECHANISMS.target(name).partition(":")[0])
    assert spec is not None and spec.origin is not None, name
    return Path(spec.origin).read_text(encoding="utf-8")


def protocol_source() -> str:
    """The protocol module's source: what a Level-2 session is shown."""
    return (HERE / "protocol.py").read_text(encoding="utf-8")


def host_source() -> str:
    return (HERE / "host_main.py").read_text(encoding="utf-8")
