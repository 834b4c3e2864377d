"""The validation ladder a generated mechanism climbs before it may touch a live iteration. Each
step is a row in `mechanism_checks`; the first failure stops the climb.

  parse     (static.py) it compiles and has the protocol's shape
  imports   (static.py) allowed imports only, no forbidden names or introspection
  contract  in the mechanism host (a separate process or container, never this one): every
            recorded candidate of the experiment is fed through every hook in order (guidance,
            select_parent, filter, on_result, as the loop would have called them), then a few
            edge cases; every output must have the protocol's shape, every call must return in
            time; state_dict -> fresh instance -> load_state_dict -> state_dict must give the same
            state, and the same guidance for the same ctx
  dry_run   one iteration on the live loop's current state, no trial spent: each hook is called,
            and at least one output must take effect (the guidance text appears in the prompt
            the proposer would send, select_parent picks another parent than the strategy, or
            filter drops a recorded revision); every function the module defines must have run
            (a helper nothing calls is dead code: refused)

After a successful climb the same host, with the state the replay built, goes live.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metaopt.core.errors import CheckFailed
from metaopt.meta_agent.search.bilevel.snapshot import Snapshot, context
from metaopt.meta_agent.search.bilevel.static import Step


@dataclass
class LadderInput:
    snap: Snapshot
    proposer: dict[str, Any]
    search: dict[str, Any]
    iteration: int
    max_iterations: int
    base_parent: str
    preview: Callable[[str], str] | None
    """guidance text -> the first prompt the proposer would send with it; None: it takes no text."""
    timeout: float = 2.0


def _ok(host: Any, calls: Counter, hook: str, *args: Any, timeout: float, offered: list[str] | None = None,
        where: str = "") -> Any:
    calls[hook] += 1
    r = host.call(hook, *args, timeout=timeout, offered=offered)
    if not r.ok:
        raise CheckFailed(f"{hook}(){where}: {r.status}: {r.error}")
    return r.value


def contract_step(host: Any, li: LadderInput, hooks: list[str]) -> tuple[Step, dict[str, Any] | None]:
    """Replay the record through every hook; returns (step, the state the replay built)."""
    t0, calls, drops = time.monotonic(), Counter(), []
    snap, to = li.snap, li.timeout
    last_ctx = None
    try:
        for i, cand in enumerate(snap.history):
            if cand["parent_id"] is None:
                continue  # the baseline is not a result of the search
            ctx = context(snap, iteration=cand["iteration"], max_iterations=li.max_iterations, proposer=li.proposer,
                          search=li.search, upto=i)
            where = f" on recorded candidate {cand['id']}"
            _ok(host, calls, "guidance", ctx, timeout=to, where=where)
            if "select_parent" in hooks:
                kept = [c for c in snap.history[:i] if c["status"] in ("baseline", "accepted")]
                parents = [{**c, "default": c is kept[-1]} for c in kept]
                _ok(host, calls, "select_parent", parents, {"seed": i}, timeout=to,
                    offered=[p["id"] for p in parents], where=where)
            rev = snap.revision(cand["id"])
            if "filter" in hooks and rev is not None:
                out = _ok(host, calls, "filter", rev, ctx, timeout=to, where=where)
                if isinstance(out, str):
                    drops.append({"candidate": cand["id"], "reason": out})
            _ok(host, calls, "on_result", cand, snap.decision(cand["id"]), ctx, timeout=to, where=where)
            last_ctx = ctx
        state = _ok(host, calls, "state_dict", timeout=to)
        for case in _edge_cases(last_ctx or context(snap, iteration=li.iteration, max_iterations=li.max_iterations,
                                                    proposer=li.proposer, search=li.search), hooks):
            _ok(host, calls, case[0], *case[1:], timeout=to, where=" on an edge case (empty kinds, None values)")
        _restore(host, calls, state, to)
        ctx = context(snap, iteration=li.iteration, max_iterations=li.max_iterations, proposer=li.proposer,
                      search=li.search)
        g1 = _ok(host, calls, "guidance", ctx, timeout=to)
        _restore(host, calls, state, to)
        again = _ok(host, calls, "state_dict", timeout=to)
        if again != state:
            raise CheckFailed(f"state does not round-trip: state_dict() after load_state_dict(s) differs from s "
                        f"({_short(state)} vs {_short(again)})")
        g2 = _ok(host, calls, "guidance", ctx, timeout=to)
        if g1 != g2:
            raise CheckFailed("the same state and ctx gave different guidance before and after a state round trip")
        _restore(host, calls, state, to)
    except CheckFailed as e:
        return Step("contract", False, str(e), _detail(host, calls, drops, t0)), None
    n = sum(1 for c in snap.history if c["parent_id"])
    return Step("contract", True, f"{n} recorded candidate(s) through every hook, edge cases, state round trip "
                                  f"({sum(calls.values())} calls)", _detail(host, calls, drops, t0)), state


def dry_run_step(host: Any, li: LadderInput, hooks: list[str], functions: list[str], state: dict[str, Any],
                 earlier: Step) -> Step:
    """One iteration on the live state; see the module docstring. Leaves the host in `state`."""
    t0, calls, effects, notes = time.monotonic(), Counter(), [], []
    snap, to = li.snap, li.timeout
    ctx = context(snap, iteration=li.iteration, max_iterations=li.max_iterations, proposer=li.proposer,
                  search=li.search)
    try:
        text = _ok(host, calls, "guidance", ctx, timeout=to)
        if text and li.preview is not None:
            if text in li.preview(text):
                effects.append(f"guidance reached the proposer's prompt: {text[:120]!r}")
            else:
                notes.append("guidance was not found in the proposer's prompt")
        elif text:
            notes.append(f"guidance not shown: the {li.proposer['name']} proposer takes no text")
        if "select_parent" in hooks:
            parents = snap.parents(li.base_parent)
            pick = _ok(host, calls, "select_parent", parents, {"seed": li.iteration}, timeout=to,
                       offered=[p["id"] for p in parents])
            if pick and pick != li.base_parent:
                effects.append(f"select_parent picked {pick} over the strategy's {li.base_parent}")
        if "filter" in hooks:
            for cid, rev in list(snap.revisions.items())[-5:]:
                out = _ok(host, calls, "filter", rev, ctx, timeout=to)
                if isinstance(out, str):
                    effects.append(f"filter would drop {cid}'s revision: {out[:120]}")
        effects += [f"filter dropped {d['candidate']}'s revision in the replay: {d['reason'][:120]}"
                    for d in earlier.detail.get("drops", [])[:3]]
        _restore(host, calls, state, to)
    except CheckFailed as e:
        return Step("dry_run", False, str(e), _detail(host, calls, [], t0))
    ran = set(host.coverage())
    dead = [f for f in functions if f not in ran]
    detail = {**_detail(host, calls, [], t0), "effects": effects, "notes": notes, "coverage": sorted(ran),
              "calls_total": dict(Counter(earlier.detail.get("calls", {})) + calls)}
    never = [h for h in hooks if detail["calls_total"].get(h, 0) == 0]
    if never:
        return Step("dry_run", False, f"hook(s) never called: {', '.join(never)}", detail)
    if dead and ran:  # built-ins run in process: no coverage, nothing to check
        return Step("dry_run", False, f"defined but never called through the hooks (dead code): {', '.join(dead)}",
                    detail)
    if not effects:
        why = "; ".join(notes) or "guidance None, no parent override, no revision dropped"
        return Step("dry_run", False, f"no hook output reached the proposer or changed a selection ({why})", detail)
    return Step("dry_run", True, "; ".join(effects)[:1000], detail)


def _restore(host: Any, calls: Counter, state: dict[str, Any], timeout: float) -> None:
    _ok(host, calls, "__reset__", timeout=timeout)
    _ok(host, calls, "load_state_dict", state, timeout=timeout)


def _edge_cases(ctx: dict[str, Any], hooks: list[str]) -> list[tuple]:
    bare = {"id": "edge-1", "parent_id": ctx["incumbent"], "iteration": ctx["iteration"], "status": "invalid",
            "reason": None, "proposer": None, "areas": [], "kinds": [], "rationale": "", "val_mean": None,
            "val_delta": None, "trials": 0, "children": 0}
    rev = {"parent_id": ctx["incumbent"], "rationale": "", "areas": [], "kinds": [], "diff": ""}
    drop = {"stage": "filter", "outcome": "drop", "reason": "edge case", "delta": None, "se": None}
    empty = {**ctx, "history": ctx["history"][:1]}
    cases = [("guidance", empty), ("filter", rev, ctx), ("on_result", bare, drop, ctx)]
    return [c for c in cases if c[0] in hooks]


def _detail(host: Any, calls: Counter, drops: list, t0: float) -> dict[str, Any]:
    return {"calls": dict(calls), "drops": drops, "isolation": getattr(host, "isolation", ""),
            "seconds": round(time.monotonic() - t0, 3)}


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) < 120 else text[:117] + "..."
