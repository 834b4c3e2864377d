"""The inner loop's real record as text for a Level-2 session, read from the store: every
candidate (parent, status and why, what it changed, rationale, diff, gate rows with their
numbers), the search parameters, the mechanisms with their hook calls and judgements, earlier
Level-2 sessions, and the meta-agent's own proposal transcripts where the store holds them.
Newest candidates keep their full diffs; older ones are cut first when the text must shrink."""

from __future__ import annotations

import json
from typing import Any

from metaopt.meta_agent.records import GateDecision
from metaopt.meta_agent.search.bilevel import records
from metaopt.meta_agent.search.bilevel.snapshot import Snapshot
from metaopt.traces.queries import meta_agent_transcripts
from metaopt.traces.store import Store


def record_text(store: Store, experiment_id: str, snap: Snapshot, *, proposer: dict[str, Any],
                iteration: int, max_chars: int = 16_000) -> str:
    gates: dict[str, list[GateDecision]] = {}
    for g in store.select(GateDecision, "experiment_id = ?", [experiment_id], order="decided_at"):
        gates.setdefault(g.candidate_id, []).append(g)
    head = [(f"Iteration {iteration}; {len(snap.history)} candidate(s) so far, {snap.trials_spent} trials spent. "
            f"The proposer is '{proposer['name']}' (takes text guidance: {proposer['takes_guidance']}; can change: "
            f"{', '.join(proposer['areas'])}).")]
    tail = [_search(store, experiment_id), _mechanisms(store, experiment_id), _sessions(store, experiment_id),
            _transcripts(store, experiment_id)]
    for diff_chars in (1500, 600, 200, 0):
        body = [_candidate(c, gates.get(c["id"], []), snap, diff_chars if i >= len(snap.history) - 8 else
                           min(diff_chars, 200)) for i, c in enumerate(snap.history)]
        text = "\n".join(head + ["", "## Candidates (oldest first)"] + body + [t for t in tail if t])
        if len(text) <= max_chars:
            return text
    return text[:max_chars] + "\n[record cut to fit]"


def _candidate(c: dict[str, Any], gates: list[GateDecision], snap: Snapshot, diff_chars: int) -> str:
    val = "-" if c["val_mean"] is None else f"{c['val_mean']:.3f}"
    delta = "" if c["val_delta"] is None else f", validation delta {c['val_delta']:+.3f}"
    lines = [(f"### {c['id']} (iteration {c['iteration']}, parent {c['parent_id'] or '-'}, by {c['proposer'] or '-'}): "
             f"{c['status']}; validation mean {val}{delta}; {c['trials']} trials; changed "
             f"{', '.join(c['kinds']) or 'nothing (baseline)'}")]
    if c["reason"]:
        lines.append(f"why: {c['reason']}")
    if c["rationale"]:
        lines.append(f"rationale: {c['rationale']}")
    for g in gates:
        nums = ", ".join(f"{k} {v:+.3f}" if k == "delta" else f"{k} {v:.3f}" for k, v in
                         (("delta", g.delta), ("se", g.se), ("threshold", g.threshold)) if v is not None)
        lines.append(f"gate {g.stage}: {g.outcome}" + (f" ({nums})" if nums else "") + f": {g.reason[:300]}")
    rev = snap.revision(c["id"])
    if rev and diff_chars and rev["diff"]:
        lines.append("diff:\n" + rev["diff"][:diff_chars])
    return "\n".join(lines)


def _search(store: Store, eid: str) -> str:
    rows = records.recent_search_params(store, eid, 3)
    if not rows:
        return ""
    out = ["", "## Search parameters (Level 1.5, newest first)"]
    out += [f"- from iteration {r['iteration']}: {r['params']} ({r['reason']})" for r in rows]
    return "\n".join(out)


def _mechanisms(store: Store, eid: str) -> str:
    mechs = records.mechanism_summaries(store, eid)
    if not mechs:
        return ""
    calls = records.hook_call_counts(store, eid)
    effects = records.recent_effects(store, eid, 12)
    judged = records.judgement_outcomes(store, eid)
    out = ["", "## Search mechanisms"]
    for m in mechs:
        h = m["mechanism_hash"]
        n = {f"{hook} {st}": v for (hh, hook, st), v in calls.items() if hh == h}
        j = judged.get(h)
        out.append(f"- {m['name']} ({m['origin']}, {h[:12]}): {m['status']}"
                   + (f" ({m['status_reason']})" if m["status_reason"] else "")
                   + (f"; calls {json.dumps(n)}" if n else "") + (f"; judged {j['outcome']}: {j['reason']}" if j else ""))
    out += [f"  iteration {e['iteration']} {e['hook']}: {e['effect'][:160]}" for e in effects
            if any(e["mechanism_hash"] == m["mechanism_hash"] for m in mechs)]
    return "\n".join(out)


def _sessions(store: Store, eid: str) -> str:
    rows = records.level2_history(store, eid)
    if not rows:
        return ""
    out = ["", "## Earlier Level-2 sessions"]
    for r in rows:
        spec = json.loads(r["spec"]) if r["spec"] else {}
        errs = json.loads(r["errors"]) if r["errors"] else []
        out.append(f"- round {r['round']} (iteration {r['iteration']}): {r['outcome']}"
                   + (f", mechanism '{spec.get('name')}': {spec.get('idea', '')[:200]}" if spec else "")
                   + (f"; errors: {' | '.join(e[:200] for e in errs)}" if errs else ""))
    return "\n".join(out)


def _transcripts(store: Store, eid: str, per: int = 1200, most: int = 3) -> str:
    """The last proposals' own transcripts, when the meta-agent's sessions were traced into the
    store (spans of an `invoke_agent` span named for the meta-agent, tagged with the experiment)."""
    rows = meta_agent_transcripts(store, eid, most)
    if not rows:
        return ""
    return "\n".join(["", "## The meta-agent's last proposal sessions (newest first)"]
                     + [f"### trace {r['trace_id']}\n{(r['t'] or '')[:per]}" for r in rows])
