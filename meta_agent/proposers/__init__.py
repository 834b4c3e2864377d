"""Proposers turn a parent harness and evidence from its failing train trials into a Revision.

Implementations, one per file, looked up by name: `heuristic` (no model), `placebo` (the negative
control: a neutral sentence appended to the system prompt) and `llm` (a meta-agent driven by a
model). A meta-model string that names a model (`provider/model`, e.g.
`anthropic/claude-opus-4-1` or `fake/script:PATH`) selects `llm` with that model.
"""

from __future__ import annotations

from meta_agent.proposers.base import Evidence, Proposer, Revision

PROPOSERS = {"heuristic": "meta_agent.proposers.heuristic:HeuristicProposer",
             "placebo": "meta_agent.proposers.placebo:PlaceboProposer",
             "llm": "meta_agent.proposers.llm:LLMProposer"}


class UnknownProposer(ValueError):
    pass


def proposer_name(meta_model: str) -> str:
    """The proposer a --meta-model value selects: `llm` for any `provider/model`, else itself."""
    return "llm" if "/" in meta_model else meta_model


def get_proposer(name: str, meta_model: str | None = None, base_url: str | None = None) -> Proposer:
    """`get_proposer("heuristic")`, `get_proposer("anthropic/claude-opus-4-1")` or
    `get_proposer("llm", "fake/script:steps.yaml")`. Building an llm proposer builds its model
    client: MissingApiKey / UnknownProvider (ModelConfigError) surface here."""
    from meta_agent.lookup import lookup

    if "/" in name:
        name, meta_model = "llm", name
    if name == "llm":
        if not meta_model:
            raise UnknownProposer("the llm proposer needs a meta model: provider/model")
        from meta_agent.proposers.llm import LLMProposer

        return LLMProposer(meta_model, base_url=base_url)
    return lookup(PROPOSERS, name, "proposer", UnknownProposer)


__all__ = ["Evidence", "Proposer", "Revision", "get_proposer", "proposer_name", "UnknownProposer", "PROPOSERS"]
