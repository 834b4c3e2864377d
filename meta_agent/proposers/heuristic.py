"""`heuristic`: no model. Reads the failing train trials' spans for the causes a harness knob
controls, and turns the knob behind the most frequent one:

  tool call timed out        -> that tool's timeout_s x3 (at most 600 s)
  episode hit the turn limit -> routing.limits.max_turns x2 (at most 200)
  tool output truncated      -> that tool's output_limit x4 (at most 50,000 characters)

One revision turns every knob the evidence points at (a fix that helps a third of the tasks
each is too small for the gate to see on a small validation set; together they may not be).
Every rationale cites the counts and the span ids it read.
"""

from __future__ import annotations

from meta_agent.proposers.base import Evidence, Revision
from task_agent.harness import Harness

MAX_TIMEOUT_S, MAX_TURNS, MAX_OUTPUT = 600.0, 200, 50_000


class HeuristicProposer:
    name = "heuristic"

    def __init__(self, model: str | None = None, base_url: str | None = None):
        """No model: `model` and `base_url` are accepted (the registry's signature) and unused."""

    def propose(self, parent: Harness, evidence: Evidence, tried: set[str]) -> Revision | None:
        child, reasons, cites = parent, [], []
        for cause, count, spans, target in _causes(evidence):
            turned = _turn_knob(child, cause, target)
            if turned is None:
                continue
            what = {"timeout": f"tool '{target}' timed out", "turn_limit": "episodes hit the turn limit",
                    "truncated": f"tool '{target}' output was truncated"}[cause]
            reasons.append(f"{what} in {count} span(s) of {len(evidence.trial_ids)} failing train trial(s): "
                           f"{_describe(child, turned, cause, target)}")
            child, cites = turned, cites + spans[:10]
        if child is parent or child.content_hash() in tried:
            return None
        return Revision(child, "; ".join(reasons), cites=cites)


def _causes(ev: Evidence) -> list[tuple[str, int, list[str], str]]:
    """(cause, count, span ids, tool name) most frequent first."""
    if not ev.trial_ids:
        return []
    marks = ", ".join("?" * len(ev.trial_ids))
    rows = ev.store.rows(
        "SELECT CASE WHEN attributes->>'$.\"metaopt.tool.timed_out\"' = 'true' THEN 'timeout'"
        "            WHEN attributes->>'$.\"metaopt.tool.truncated\"' = 'true' THEN 'truncated' END AS cause,"
        "       tool_name AS target, count(*) AS n, list(span_id ORDER BY start_ns) AS spans"
        f" FROM spans WHERE operation_name = 'execute_tool' AND trial_id IN ({marks}) GROUP BY 1, 2"
        " UNION ALL"
        " SELECT 'turn_limit', '', count(*), list(span_id ORDER BY start_ns) FROM spans"
        f" WHERE operation_name = 'invoke_agent' AND trial_id IN ({marks})"
        "   AND attributes->>'$.\"metaopt.outcome\"' = 'turn_limit' HAVING count(*) > 0",
        [*ev.trial_ids, *ev.trial_ids])
    found = [(r["cause"], r["n"], r["spans"], r["target"]) for r in rows if r["cause"]]
    priority = {"timeout": 0, "turn_limit": 1, "truncated": 2}  # ties: the cause that kills a run first
    return sorted(found, key=lambda c: (-c[1], priority[c[0]]))


def _turn_knob(h: Harness, cause: str, target: str) -> Harness | None:
    data = h.model_dump(mode="json", exclude_unset=True)
    if cause == "turn_limit":
        now = h.routing.limits.max_turns
        new = min(MAX_TURNS, now * 2)
        if new == now:
            return None
        data.setdefault("routing", {}).setdefault("limits", {})["max_turns"] = new
    else:
        field, cap, factor = ("timeout_s", MAX_TIMEOUT_S, 3) if cause == "timeout" else ("output_limit", MAX_OUTPUT, 4)
        tools = data.get("tools", [])
        [i] = [i for i, t in enumerate(h.tools) if t.name == target] or [None]
        if i is None:
            return None
        now = getattr(h.tools[i], field)
        new = min(cap, now * factor)
        if new == now:
            return None
        tools[i][field] = type(now)(new)
    return Harness.model_validate(data)


def _describe(parent: Harness, child: Harness, cause: str, target: str) -> str:
    if cause == "turn_limit":
        return f"raised routing.limits.max_turns {parent.routing.limits.max_turns} -> {child.routing.limits.max_turns}"
    field = "timeout_s" if cause == "timeout" else "output_limit"
    old = next(getattr(t, field) for t in parent.tools if t.name == target)
    new = next(getattr(t, field) for t in child.tools if t.name == target)
    return f"raised tools[{target}].{field} {old} -> {new}"
