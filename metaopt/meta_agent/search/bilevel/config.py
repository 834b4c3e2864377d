"""BilevelConfig: the settings of `--strategy bilevel` (RunConfig.bilevel)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class BilevelConfig(BaseModel):
    """The outer loop's settings. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    base: str = "greedy"
    """The strategy the outer loop steers (its parent pick is the default the mechanisms may override): a
    registered strategy (meta_agent.search.strategies.STRATEGIES) other than bilevel, e.g. greedy or pareto."""
    builtins: list[str] = ["tabu", "bandit", "explore"]
    """Registered mechanisms (built-in or a plugin's: meta_agent.search.mechanisms.MECHANISMS) active from the start."""
    level15_every: int = Field(default=3, ge=1)
    """Level 1.5 adjusts the search parameters every N iterations."""
    level2_every: int = Field(default=4, ge=1)
    """Level 2 writes a mechanism every M iterations (when no generated mechanism is on trial)."""
    max_explore_rate: float = Field(default=0.5, ge=0, le=1)
    """Level 1.5 raises the chance of extending a random kept candidate (instead of the strategy's pick)
    on a plateau, up to this (0: never)."""
    level2_model: str | None = None
    """Model of the Level-2 sessions: None = the meta-model when it names one (heuristic: no Level 2);
    'none' switches Level 2 off."""
    level2_rounds: int = Field(default=3, ge=0)
    """Level-2 sessions per experiment at most."""
    host: Literal["auto", "process", "docker"] = "auto"
    """Where generated mechanisms run: a sandboxed child process, or a container (auto: docker when the
    experiment runs its trials in Docker)."""
    call_timeout_s: float = Field(default=2.0, gt=0)
    """A hook call that takes longer switches its mechanism off."""
    window: int = Field(default=2, ge=1)
    """Iterations per judgement window (with / without the mechanism)."""
    judge_pairs: int = Field(default=2, ge=1)
    """On/off window pairs a generated mechanism is judged on at most."""
    record_chars: int = Field(default=16_000, ge=2_000)
    """Size of the record a Level-2 session reads."""

    @field_validator("base")
    @classmethod
    def _steerable(cls, v: str) -> str:
        from metaopt.core.errors import UnknownName
        from metaopt.meta_agent.search.strategies import STRATEGIES

        known = [n for n in STRATEGIES.names() if n != "bilevel"]
        if v not in known:
            raise UnknownName("base strategy", v, known)
        return v

    @field_validator("builtins")
    @classmethod
    def _registered(cls, v: list[str]) -> list[str]:
        from metaopt.meta_agent.search.mechanisms import MECHANISMS

        for name in v:
            MECHANISMS.target(name)  # UnknownName, listing the known ones
        return v
