"""Proposers turn a parent harness and evidence from its failing train trials into a Revision.

Implementations, one per file, looked up by name: `heuristic` (no model). The `llm` meta-agent
is not built yet.
"""

from __future__ import annotations

from meta_agent.proposers.base import Evidence, Proposer, Revision

PROPOSERS = {"heuristic": "meta_agent.proposers.heuristic:HeuristicProposer"}


class UnknownProposer(ValueError):
    pass


def get_proposer(name: str) -> Proposer:
    from meta_agent.lookup import lookup

    return lookup(PROPOSERS, name, "proposer", UnknownProposer)


__all__ = ["Evidence", "Proposer", "Revision", "get_proposer", "UnknownProposer", "PROPOSERS"]
