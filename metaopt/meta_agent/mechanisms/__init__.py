"""Search mechanisms for the bilevel strategy: the protocol (protocol.py), the built-in mechanisms
(tabu.py, bandit.py, explore.py: one file each, written exactly as a generated one would be) and
the host a mechanism runs in (host_main.py). See protocol.py for the contract."""

from __future__ import annotations

import hashlib
from pathlib import Path

BUILTINS = ("tabu", "bandit", "explore")
HERE = Path(__file__).parent


def source_hash(source: str) -> str:
    """A mechanism's identity: the sha256 of its source text."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def builtin_source(name: str) -> str:
    if name not in BUILTINS:
        raise KeyError(f"no built-in mechanism {name!r} (built-ins: {', '.join(BUILTINS)})")
    return (HERE / f"{name}.py").read_text(encoding="utf-8")


def protocol_source() -> str:
    """The protocol module's source: what a Level-2 session is shown."""
    return (HERE / "protocol.py").read_text(encoding="utf-8")


def host_source() -> str:
    return (HERE / "host_main.py").read_text(encoding="utf-8")
