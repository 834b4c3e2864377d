"""Failure summaries for the meta-agent's briefing beyond the knob-shaped causes (heuristic.causes):
tool calls that failed, grouped by tool and by what they said; tool outputs the loop dropped to fit
the context budget; and what the verifier said when it reports no per-test results. Read from the failing trials' spans, messages and trial rows only."""

from __future__ import annotations

import re

from metaopt.meta_agent.proposers.base import Evidence
from metaopt.task_agent.loop import DROPPED
from metaopt.traces import queries

FAIL_LINE = re.compile(r"(?im)^.*\b(FAIL(ED)?|ERROR|AssertionError|assert|expected|missing)\b.*$")


def tool_errors(ev: Evidence, offered: set[str], limit: int = 4) -> list[str]:
    """One line per failing tool (most failed calls first): how many calls failed, in which tasks,
    and the first result it gave; a tool the harness does not offer is called out as such."""
    if not ev.trial_ids:
        return []
    rows = queries.failed_tool_calls(ev.store, ev.trial_ids, limit)
    out = []
    for r in rows:
        said = " ".join((r["said"] or "").split())[:160]
        where = f"in tasks {', '.join(sorted(r['tasks'])[:6])}"
        if r["tool"] not in offered:
            out.append(f"{r['n']} call(s) to tool '{r['tool']}', which the harness does not offer to that role "
                       f"(the model keeps asking for it), {where}")
        else:
            out.append(f"{r['n']} call(s) of {r['tool']} failed, {where}" + (f"; first result: {said!r}" if said else ""))
    return out


def context_drops(ev: Evidence, max_tokens: int | None) -> list[str]:
    """A line when the loop dropped tool outputs to fit the context budget in the failing trials."""
    if not ev.trial_ids:
        return []
    row = queries.trials_with_message(ev.store, ev.trial_ids, DROPPED)
    if not row["n"]:
        return []
    where = ", ".join(sorted(row["tasks"])[:6])
    line = (f"tool outputs were dropped to fit the context budget (routing.context.max_tokens is {max_tokens}) "
            f"in {row['n']} trial(s), in tasks {where}")
    return [line]


def verifier_says(test_output: str | None, limit: int = 2) -> str:
    """The verifier's first failure lines, for a trial without per-test results ('' when none)."""
    lines = [" ".join(m.group(0).split())[:200] for m in FAIL_LINE.finditer(test_output or "")]
    return "; ".join(lines[:limit])
