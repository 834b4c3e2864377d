"""Level 1.5: every N iterations, adjust the search's parameters from the ledger (no model: the
rules below, so the same record always gives the same parameters). The result is a
`search_params` row; the latest row is what the loop uses, also after a resume.

  freeze        an area with 3 or more proposals and no accepted one since its last accept is
                frozen for 2N iterations (a revision touching a frozen area is dropped before
                any trial); never the last area the proposer can still change
  favour        areas with accepted changes (best accept rate first), then reachable areas no
                candidate has touched
  explore_rate  the chance the parent is drawn among all kept candidates instead of the
                strategy's pick: +0.15 (at most max_explore_rate, 0.5) after N iterations without an accept,
                -0.15 (at least 0) when one was accepted in the last N
  guidance      the above in words, for a proposer that takes text
"""

from __future__ import annotations

from typing import Any

from metaopt.meta_agent.search.mechanisms.protocol import AREAS

FREEZE_AFTER = 3
STEP, MAX_RATE = 0.15, 0.5


def initial() -> dict[str, Any]:
    return {"favour": [], "freeze": {}, "explore_rate": 0.0, "guidance": None}


def public(params: dict[str, Any], iteration: int) -> dict[str, Any]:
    """The `search` part of a hook's ctx: frozen areas as a list (those still frozen now)."""
    return {"favour": list(params["favour"]), "explore_rate": params["explore_rate"],
            "freeze": sorted(a for a, until in params["freeze"].items() if until > iteration)}


def adjust(prev: dict[str, Any], history: list[dict[str, Any]], iteration: int, every: int,
           reachable: list[str], max_rate: float = MAX_RATE) -> tuple[dict[str, Any], str]:
    """New parameters from `prev` and the candidates so far; (params, the reason in words)."""
    tried = [c for c in history if c["parent_id"] is not None]
    stats: dict[str, dict[str, int]] = {}
    for c in tried:
        for area in c["areas"]:
            s = stats.setdefault(area, {"tried": 0, "accepted": 0, "since_accept": 0})
            s["tried"] += 1
            if c["status"] == "accepted":
                s["accepted"] += 1
                s["since_accept"] = 0
            else:
                s["since_accept"] += 1
    why: list[str] = []
    freeze = {a: until for a, until in prev["freeze"].items() if until > iteration}
    for a in sorted(set(prev["freeze"]) - set(freeze)):
        why.append(f"{a} unfrozen (its freeze ran out)")
    for area, s in sorted(stats.items()):
        open_areas = [x for x in reachable if x not in freeze]
        if area in freeze or s["since_accept"] < FREEZE_AFTER:
            continue
        if open_areas == [area]:
            why.append(f"{area} not frozen: it is the last area the proposer can change")
            continue
        freeze[area] = iteration + 2 * every
        why.append(f"{area} frozen until iteration {freeze[area]}: {s['since_accept']} proposals since its last "
                   f"accept ({s['accepted']} of {s['tried']} accepted)")
    won = sorted((a for a, s in stats.items() if s["accepted"] and a not in freeze),
                 key=lambda a: (-stats[a]["accepted"] / stats[a]["tried"], AREAS.index(a) if a in AREAS else 9))
    fresh = [a for a in reachable if a not in stats and a not in freeze]
    favour = won + fresh
    last_accept = max((c["iteration"] for c in tried if c["status"] == "accepted"), default=0)
    rate = prev["explore_rate"]
    if iteration - last_accept >= every and tried and rate < max_rate:
        rate = min(max_rate, round(rate + STEP, 3))
        why.append(f"explore_rate {prev['explore_rate']:.2f} -> {rate:.2f}: no accept since iteration {last_accept}")
    elif iteration - last_accept < every and last_accept and rate > 0:
        rate = max(0.0, round(rate - STEP, 3))
        why.append(f"explore_rate {prev['explore_rate']:.2f} -> {rate:.2f}: candidate accepted at iteration {last_accept}")
    lines = []
    if won:
        lines.append("Changes that were accepted so far were in: " + ", ".join(
            f"{a} ({stats[a]['accepted']} of {stats[a]['tried']})" for a in won) + ".")
    if fresh:
        lines.append("Not tried yet: " + ", ".join(fresh) + ".")
    if freeze:
        lines.append("Frozen for now (repeatedly rejected; revisions touching them are dropped): "
                     + ", ".join(sorted(freeze)) + ".")
    params = {"favour": favour, "freeze": freeze, "explore_rate": rate, "guidance": " ".join(lines) or None}
    return params, "; ".join(why) or "no change warranted by the record"
