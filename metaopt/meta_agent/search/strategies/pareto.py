"""`pareto`: GEPA-style parent selection from the per-task Pareto frontier of validation scores,
plus a merge of two frontier candidates that changed disjoint components of a common ancestor
(optimizer-lessons section 10). Pure functions over the loop's CandidateViews; no I/O.

A CandidateView carries `candidate_id`, `parent_id`, `iteration`, `status`, `harness`, `val_mean`,
and `val_scores`: task_id -> list of trial scores (float, or None for a trial that errored), `{}`
when the candidate was not evaluated on validation.

Who joins the frontier: only `baseline` and `accepted` candidates with validation scores.
GEPA admits every evaluated candidate; we do not admit `inconclusive` ones (nor `rejected`,
`invalid`, `pending`), because the gate found their aggregate change indistinguishable from
noise, and a per-task "win" on K trials is noisier still: letting them in would make lucky
draws parents. The gate stays the one place that decides what is trusted.

Per-task score: the mean of a task's scored trials (None excluded, as in optimize._mean); a task
with no scored trial is skipped for that candidate. A task is won by every candidate whose mean
is within 1e-9 of the best (ties included). Tasks whose best mean is 0 have no winner: nobody
solved them, and counting them would put every candidate on the frontier. Caveat (GEPA's): a
candidate good everywhere but best nowhere is not on the frontier.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from metaopt.meta_agent.records import CandidateView
from metaopt.task_agent.harness import Harness

KEPT = ("baseline", "accepted")
EPS = 1e-9


def _task_means(c: CandidateView) -> dict[str, float]:
    out = {}
    for task, trials in c.val_scores.items():
        scored = [x for x in trials if x is not None]
        if scored:
            out[task] = sum(scored) / len(scored)
    return out


def _order(candidates: list[CandidateView]) -> list[CandidateView]:
    return sorted(candidates, key=lambda c: (c.iteration, c.candidate_id))


def frontier(candidates: list[CandidateView]) -> dict[str, list[str]]:
    """candidate_id -> sorted task ids it wins, for every kept candidate (baseline/accepted) with
    validation scores that is best (ties included) on at least one task. Insertion order follows
    (iteration, candidate_id). Empty when no kept candidate has per-task data."""
    means = {c.candidate_id: _task_means(c) for c in _order(candidates) if c.status in KEPT}
    best: dict[str, float] = {}
    for per in means.values():
        for task, m in per.items():
            best[task] = max(best.get(task, m), m)
    wins: dict[str, list[str]] = {}
    for cid, per in means.items():
        won = sorted(t for t, m in per.items() if best[t] > 0 and m >= best[t] - EPS)
        if won:
            wins[cid] = won
    return wins


class Pareto:
    name = "pareto"

    def select(self, candidates: list[CandidateView], rng) -> CandidateView:
        """A frontier candidate, drawn with probability proportional to the number of tasks it
        wins using `rng` (a random.Random; same seed and candidates -> same choice). Without
        per-task data, the latest kept candidate (as `greedy`). ValueError if none is kept."""
        kept = [c for c in _order(candidates) if c.status in KEPT]
        if not kept:
            raise ValueError("no baseline or accepted candidate to select from")
        wins = frontier(kept)
        if not wins:
            return kept[-1]
        by_id = {c.candidate_id: c for c in kept}
        ids = list(wins)
        return by_id[rng.choices(ids, weights=[len(wins[i]) for i in ids])[0]]

    frontier = staticmethod(frontier)

    def merge(self, candidates: list[CandidateView], rng, tried: set[str] | frozenset = frozenset()
              ) -> tuple[Harness, list[str], str] | None:
        """Merge two frontier candidates (see `merge`)."""
        return merge(candidates, rng, tried)


# -- merge ----------------------------------------------------------------------------------

def _components(h: Harness) -> dict[str, Any]:
    """The mergeable components of `h` as JSON-able values (absent entries are simply missing).
    `routing.roles` carries `start_role` with it: the start role must name one of the roles.
    The model section, name and description are not components."""
    d = h.model_dump(mode="json")
    p, r = d["prompts"], d["routing"]
    comp = {"prompts.system": p["system"], "prompts.task_template": p["task_template"],
            "routing.limits": r["limits"], "routing.context": r["context"],
            "routing.verification": r["verification"],
            "routing.roles": {"roles": r["roles"], "start_role": r["start_role"]}}
    comp.update({f"prompts.roles.{k}": v for k, v in p["roles"].items()})
    comp.update({f"tools.{t['name']}": t for t in d["tools"]})
    return comp


def _changed(h: Harness, anc: dict[str, Any]) -> dict[str, Any]:
    """Components of `h` that differ from the ancestor's: key -> new value (None = removed)."""
    mine = _components(h)
    return {k: mine.get(k) for k in sorted(set(mine) | set(anc)) if mine.get(k) != anc.get(k)}


def _apply(base: Harness, changes: dict[str, Any]) -> Harness:
    """`base` with `changes` applied; tools keep base order, new ones appended. May raise
    ValueError (pydantic) if the combination is not a valid harness."""
    d = base.model_dump(mode="json")
    for key, v in changes.items():
        head, _, rest = key.partition(".")
        if head == "tools":
            idx = next((i for i, t in enumerate(d["tools"]) if t["name"] == rest), None)
            if idx is not None and v is None:
                del d["tools"][idx]
            elif idx is not None:
                d["tools"][idx] = v
            elif v is not None:
                d["tools"].append(v)
        elif key == "routing.roles":
            d["routing"].update(v)
        elif key.startswith("prompts.roles."):
            roles, name = d["prompts"]["roles"], key.removeprefix("prompts.roles.")
            if v is None:
                roles.pop(name, None)
            else:
                roles[name] = v
        else:
            d[head][rest] = v
    return Harness.model_validate(d)


def _lineage(cid: str, by_id: dict[str, CandidateView]) -> list[str]:
    """`cid`, its parent, grandparent, ... (stops at an unknown id or a cycle)."""
    out: list[str] = []
    cur: str | None = cid
    while cur is not None and cur in by_id and cur not in out:
        out.append(cur)
        cur = by_id[cur].parent_id
    return out


def merge(candidates: list[CandidateView], rng, tried: set[str] | frozenset = frozenset()
          ) -> tuple[Harness, list[str], str] | None:
    """A GEPA merge: (child, [parent_a, parent_b], rationale), or None when no pair qualifies.

    A pair qualifies when both are on the frontier, share a nearest common ancestor (parent_id
    links; a candidate counts as its own lineage), each changed at least one component vs that
    ancestor that the other did not (identical edits by both are kept), no component was changed
    by both to different values (such pairs are SKIPPED rather than resolved by val_mean:
    keeping one side would silently drop the other's edit, and the merge would no longer be the
    union its rationale claims; conflicts are the proposer's job), and the combination validates
    as a Harness whose content_hash is not in `tried`.
    Components: prompts.system, prompts.roles.<name>, prompts.task_template, tools.<name> (whole
    ToolDef; added and removed tools count), routing.limits, routing.context,
    routing.verification, routing.roles (with start_role). The child starts from the ancestor, so
    its model section, name and description are the ancestor's. One qualifying pair is chosen
    with `rng`; pairs are enumerated in (iteration, candidate_id) order, so a seed reproduces it.
    """
    by_id = {c.candidate_id: c for c in candidates}
    front = list(frontier(candidates))
    options = []
    for a, b in combinations(front, 2):
        line_b = set(_lineage(b, by_id))
        anc_id = next((x for x in _lineage(a, by_id) if x in line_b), None)
        if anc_id is None:
            continue
        anc = by_id[anc_id].harness
        base = _components(anc)
        ca, cb = _changed(by_id[a].harness, base), _changed(by_id[b].harness, base)
        only_a, only_b = [k for k in ca if k not in cb], [k for k in cb if k not in ca]
        if not only_a or not only_b or any(ca[k] != cb[k] for k in set(ca) & set(cb)):
            continue
        try:
            child = _apply(anc, {**ca, **cb})
        except ValueError:
            continue
        if child.content_hash() in tried:
            continue
        same = [k for k in ca if k in cb]
        why = (f"merge of {a} and {b} over common ancestor {anc_id}: from {a}: {', '.join(only_a)}; "
               f"from {b}: {', '.join(only_b)}" + (f"; made identically by both: {', '.join(same)}"
                                                    if same else ""))
        options.append((child, [a, b], why))
    return rng.choice(options) if options else None
