"""Falsifiable edit manifests: what a revision claims before it runs, and the check of that claim.

    Manifest(cause=..., fixes=[train task ids], keeps=[train task ids])   stated by the proposer
    check(manifest, parent_train, child_train) -> PredictionCheck         after screen + validation

A train task *passes* under a candidate when it has at least one scored trial and every scored
trial scored 1.0 (errored trials are left out, as the gate leaves them out). `fixes` are train
tasks the parent does not pass that the edit should make pass; `keeps` are train tasks the parent
passes that the edit must not break. The check compares pass/fail per task between the parent's
and the child's train trials: only TRAIN outcomes are ever compared task by task (validation and
test stay aggregate, see meta_agent.proposers.history).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Scores = dict[str, list[float | None]]  # task id -> per-trial scores, None = errored (as meta_agent.gate)


class Manifest(BaseModel):
    """An edit's falsifiable claim."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    cause: str = Field(min_length=1)
    """The failure cause the edit addresses, in a sentence."""
    fixes: list[str] = Field(default_factory=list)
    """Train task ids the parent fails that the edit should flip to passing."""
    keeps: list[str] = Field(default_factory=list)
    """Train task ids the parent passes that the edit must not break."""


Verdict = Literal["as_claimed", "partly", "not_as_claimed", "unchecked"]


class PredictionCheck(BaseModel):
    """The manifest held against the child's train results (task ids are train tasks only)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    verdict: Verdict
    """as_claimed: every predicted fix passes and no listed keep broke; partly: some predicted fixes
    pass, not all (or a keep broke); not_as_claimed: no predicted fix passes (however many keeps
    held: an edit that changes nothing keeps them all), or keeps broke with no fix predicted;
    unchecked: nothing predicted had child results."""
    hits: list[str] = Field(default_factory=list)
    """Predicted fixes that pass under the child."""
    misses: list[str] = Field(default_factory=list)
    """Predicted fixes that still do not pass."""
    kept: list[str] = Field(default_factory=list)
    """Listed keeps that still pass."""
    broken: list[str] = Field(default_factory=list)
    """Listed keeps that no longer pass."""
    unexpected_fixes: list[str] = Field(default_factory=list)
    """Train tasks not predicted that flipped to passing."""
    unexpected_breaks: list[str] = Field(default_factory=list)
    """Train tasks not listed that flipped to failing."""
    unchecked: list[str] = Field(default_factory=list)
    """Predicted tasks with no scored child train trial (not run, or errored)."""
    summary: str = ""
    """One sentence for the gate row, the history and the explorer."""


def passes(trials: list[float | None] | None) -> bool | None:
    """True / False for a task's trials, None when none was scored."""
    scored = [s for s in trials or [] if s is not None]
    if not scored:
        return None
    return all(s >= 1.0 - 1e-9 for s in scored)


def check(manifest: Manifest, parent_train: Scores, child_train: Scores) -> PredictionCheck:
    """Compare the manifest with what happened on the train tasks both candidates ran. Never raises."""
    out: dict[str, list[str]] = {k: [] for k in ("hits", "misses", "kept", "broken", "unexpected_fixes",
                                                 "unexpected_breaks", "unchecked")}
    predicted = set(manifest.fixes) | set(manifest.keeps)
    for t in manifest.fixes:
        now = passes(child_train.get(t))
        out["unchecked" if now is None else "hits" if now else "misses"].append(t)
    for t in manifest.keeps:
        now = passes(child_train.get(t))
        out["unchecked" if now is None else "kept" if now else "broken"].append(t)
    for t in sorted(set(child_train) - predicted):
        before, now = passes(parent_train.get(t)), passes(child_train.get(t))
        if before is None or now is None or before == now:
            continue
        out["unexpected_fixes" if now else "unexpected_breaks"].append(t)
    checked = len(out["hits"]) + len(out["misses"]) + len(out["kept"]) + len(out["broken"])
    if not checked:
        verdict: Verdict = "unchecked"
    elif not out["misses"] and not out["broken"]:
        verdict = "as_claimed"
    elif out["hits"]:
        verdict = "partly"
    else:
        verdict = "not_as_claimed"
    return PredictionCheck(verdict=verdict, summary=_summary(verdict, manifest, out), **out)


def _summary(verdict: Verdict, m: Manifest, o: dict[str, list[str]]) -> str:
    words = {"as_claimed": "did what it claimed", "partly": "did part of what it claimed",
             "not_as_claimed": "did not do what it claimed", "unchecked": "claim not checked"}[verdict]
    bits = [f"{len(o['hits'])}/{len(m.fixes)} predicted fixes pass"] if m.fixes else []
    if m.keeps:
        bits.append(f"{len(o['broken'])}/{len(m.keeps)} listed keeps broke")
    if o["unexpected_fixes"] or o["unexpected_breaks"]:
        bits.append(f"unexpected: {len(o['unexpected_fixes'])} fixed, {len(o['unexpected_breaks'])} broke")
    if o["unchecked"]:
        bits.append(f"{len(o['unchecked'])} predicted task(s) without child train results")
    return f"{words}" + (f" ({'; '.join(bits)})" if bits else " (no train task was predicted)")
