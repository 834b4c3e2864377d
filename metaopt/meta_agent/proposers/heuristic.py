"""`heuristic`: no model. Reads the failing train trials' spans for the causes a harness knob
controls, and turns the knob behind the most frequent one:

  tool call timed out        -> that tool's timeout_s x3 (at most 600 s)
  episode hit the turn limit -> routing.limits.max_turns x2 (at most 200)
  tool output truncated      -> that tool's output_limit x4, or to the longest output it cut
                                (rounded up to a thousand; at most 50,000 characters)

One revision turns every knob the evidence points at (a fix that helps a third of the tasks
each is too small for the gate to see on a small validation set; together they may not be).
Every rationale cites the counts and the span ids it read, and its manifest claims the train
tasks whose failing trials showed the cause.

It reads the experiment's history (meta_agent.proposers.history): a cause whose knob an earlier
candidate already turned for that same cause, and which was then not accepted (rejected,
inconclusive or invalid), is skipped, so it moves on to the next cause instead of proposing the
same change again; unless that candidate's own failing train trials still hit the raised limit,
when it is raised again from the candidate's value (`raised_again`: the raise fell short). Cause
keys (`turn_limit`, `timeout:TOOL`, `truncated:TOOL`) are written into the manifest's cause in
brackets, which is how it recognises its own earlier changes.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, NamedTuple

from metaopt.meta_agent.predictions import Manifest
from metaopt.meta_agent.proposers import history
from metaopt.meta_agent.proposers.base import Evidence, Revision
from metaopt.meta_agent.records import Candidate, failing_train_trials
from metaopt.task_agent.harness import Harness
from metaopt.traces.queries import knob_causes

MAX_TIMEOUT_S, MAX_TURNS, MAX_OUTPUT = 600.0, 200, 50_000


class HeuristicProposer:
    name = "heuristic"
    areas = ("limits",)  # all its revisions change (turn limits, tool timeouts, output limits)

    def __init__(self, model: str | None = None, base_url: str | None = None):
        """No model: `model` and `base_url` are accepted (the registry's signature) and unused."""
        self.last_run: dict = {}  # skipped causes of the last propose(), for the explainer

    def propose(self, parent: Harness, evidence: Evidence, tried: set[str]) -> Revision | None:
        child, reasons, cites, keys, fixes = parent, [], [], [], []
        failed = failed_causes(evidence)
        skipped = []
        for c in causes(evidence):
            cause, count, spans, target, tasks = c.cause, c.n, c.spans, c.target, c.tasks
            key = f"{cause}:{target}" if target else cause
            to = None
            if key in failed:
                path = (knob(child, c) or ("",))[0]
                again = raised_again(evidence, failed[key], path) if path else None
                if again is None:
                    skipped.append(f"{key} (tried in {_short(failed[key])}, not accepted)")
                    continue
                to = again[0]  # its own train trials still hit the raised limit: raise it again from there
            turned = _turn_knob(child, c, to)
            if turned is None:
                continue
            turned, change = turned
            change += f" ({_short(failed[key])} raised it less and its train trials still hit it)" if to else ""
            what = {"timeout": f"tool '{target}' timed out", "turn_limit": "episodes hit the turn limit",
                    "truncated": f"tool '{target}' output was truncated"}[cause]
            reasons.append(f"{what} in {count} span(s) of {len(evidence.trial_ids)} failing train trial(s): "
                           f"{change}")
            child, cites = turned, cites + spans[:10]
            keys.append(f"{what} [{key}]")
            fixes += [t for t in tasks if t not in fixes]
        self.last_run = {"skipped": skipped}
        if child is parent or child.content_hash() in tried:
            return None
        why = "; ".join(reasons) + (f" (skipped, tried before: {', '.join(skipped)})" if skipped else "")
        return Revision(child, why, cites=cites, manifest=Manifest(cause="; ".join(keys), fixes=sorted(fixes)))


def failed_causes(ev: Evidence) -> dict[str, str]:
    """Cause key -> the (latest) candidate id that already addressed it and was not accepted (or is
    being judged now)."""
    out: dict[str, str] = {}
    for r in history.load(ev.store, ev.experiment_id):
        if r.status in ("rejected", "inconclusive", "invalid", "pending") and r.predictions:  # pending: in flight
            for key in re.findall(r"\[([a-z_]+(?::[^\]]+)?)\]", r.predictions.cause):
                out[key] = r.candidate_id
    return out


def raised_again(ev: Evidence, candidate_id: str, path: str) -> tuple[Any, Cause] | None:
    """(new value, the cause) for the limit at `path` raised again from the value candidate
    `candidate_id` gave it (`knob`), when that candidate's own failing train trials still hit it;
    else None. Train trials only: never the validation or test split."""
    [cand] = ev.store.select(Candidate, "candidate_id = ?", [candidate_id]) or [None]
    if cand is None:
        return None
    seen = replace(ev, trial_ids=failing_train_trials(ev.store, ev.experiment_id, candidate_id))
    for c in causes(seen):
        edit = knob(cand.harness, c)
        if edit is not None and edit[0] == path:
            return edit[2], c
    return None


def _short(candidate_id: str) -> str:
    return candidate_id.rsplit("/", 1)[-1]


class Cause(NamedTuple):
    cause: str  # timeout | truncated (per tool) | turn_limit
    n: int
    spans: list[str]
    target: str  # the tool ('' for turn_limit)
    tasks: list[str]
    most: int | None  # truncated: the longest output before it was cut, in characters


def causes(ev: Evidence) -> list[Cause]:
    """The knob-shaped causes in the failing trials' spans, most frequent first."""
    if not ev.trial_ids:
        return []
    rows = knob_causes(ev.store, ev.trial_ids)
    found = [Cause(r["cause"], r["n"], r["spans"], r["target"], r["tasks"], r["most"]) for r in rows if r["cause"]]
    priority = {"timeout": 0, "turn_limit": 1, "truncated": 2}  # ties: the cause that kills a run first
    return sorted(found, key=lambda c: (-c.n, priority[c.cause], c.target))  # then the tool: not the query's row order


def knob(h: Harness, c: Cause) -> tuple[str, Any, Any] | None:
    """The edit that turns the knob behind cause `c` (turn limit x2, a tool's timeout x3, its output
    limit x4 or to the longest output it cut, rounded up to a thousand, each capped) as (dotted path,
    value now, new value); None when the knob is at (or above) its cap or the tool is not defined."""
    if c.cause == "turn_limit":
        now = h.routing.limits.max_turns
        return None if now >= MAX_TURNS else ("routing.limits.max_turns", now, min(MAX_TURNS, now * 2))
    tool = next((t for t in h.tools if t.name == c.target), None)
    if tool is None:
        return None
    if c.cause == "timeout":
        field, new = "timeout_s", round(min(MAX_TIMEOUT_S, tool.timeout_s * 3), 3)
    else:
        field, new = "output_limit", min(MAX_OUTPUT, max(tool.output_limit * 4, -(-(c.most or 0) // 1000) * 1000))
    now = getattr(tool, field)
    return None if new <= now else (f"tools.{c.target}.{field}", now, new)  # never lower a limit set above the cap


def _turn_knob(h: Harness, c: Cause, to: Any = None) -> tuple[Harness, str] | None:
    """`h` with the knob behind `c` turned (to `to` when given: a raise an earlier candidate made
    that fell short, raised again), and a line saying what changed."""
    edit = knob(h, c)
    if edit is None:
        return None
    path, now, new = edit if to is None else (*edit[:2], to)
    if new <= now:  # never lower a limit
        return None
    data = h.model_dump(mode="json", exclude_unset=True)
    if c.cause == "turn_limit":
        data.setdefault("routing", {}).setdefault("limits", {})["max_turns"] = new
        return Harness.model_validate(data), f"raised {path} {now} -> {new}"
    field = path.rsplit(".", 1)[1]  # the tool's name may hold dots: index the tool list, not the path
    [i] = [i for i, t in enumerate(h.tools) if t.name == c.target]
    data["tools"][i][field] = new
    return Harness.model_validate(data), f"raised tools[{c.target}].{field} {now} -> {new}"
