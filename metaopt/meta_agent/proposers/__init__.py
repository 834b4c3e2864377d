"""Proposers turn a parent harness and evidence from its failing train trials into a Revision.

Implementations, one per file, looked up by name (core.registry; plugins through the
`metaopt.proposers` entry-point group): `heuristic` (no model), `placebo` (the negative control:
a neutral sentence appended to the system prompt) and `llm` (a meta-agent driven by a model). A
meta-model string that names a model (`provider/model`, e.g. `anthropic/claude-opus-4-1` or
`fake/script:PATH`) selects `llm` with that model; `placebo:S` is the placebo taking S seconds per
proposal (a stand-in for a meta-model's latency, for benchmarks). Each registered
target is a class taking `(model: str | None = None, base_url: str | None = None)`.
"""

from __future__ import annotations

from metaopt.core.errors import UnknownName, UserError
from metaopt.core.registry import Registry
from metaopt.meta_agent.proposers.base import Evidence, Proposer, Revision

PROPOSERS = Registry("proposer", "metaopt.proposers", {
    "heuristic": "metaopt.meta_agent.proposers.heuristic:HeuristicProposer",
    "placebo": "metaopt.meta_agent.proposers.placebo:PlaceboProposer",
    "llm": "metaopt.meta_agent.proposers.llm:LLMProposer",
})


def proposer_name(meta_model: str) -> str:
    """The proposer a --meta-model value selects: `llm` for any `provider/model`, else itself."""
    return "llm" if "/" in meta_model else meta_model


def get_proposer(name: str, meta_model: str | None = None, base_url: str | None = None) -> Proposer:
    """`get_proposer("heuristic")`, `get_proposer("anthropic/claude-opus-4-1")` or
    `get_proposer("llm", "fake/script:steps.yaml")`. Building an llm proposer builds its model
    client: MissingApiKey / UnknownProvider (ModelConfigError) surface here; an unknown name is
    UnknownName."""
    if "/" in name:
        name, meta_model = "llm", name
    if ":" in name and name.partition(":")[0] in ("heuristic", "placebo"):  # `placebo:6`: its argument (a latency)
        name, _, meta_model = name.partition(":")
    if name == "llm" and not meta_model:
        raise UserError("give the llm meta-agent's model as provider/model (e.g. anthropic/claude-opus-4-1)",
                        field="--meta-model")
    if name not in PROPOSERS:
        raise UnknownName("proposer", name, PROPOSERS.names(),
                          f": '{name}' is not available (or give a model as provider/model for the llm meta-agent)")
    return PROPOSERS.load(name)(meta_model, base_url=base_url)


__all__ = ["PROPOSERS", "Evidence", "Proposer", "Revision", "get_proposer", "proposer_name"]
