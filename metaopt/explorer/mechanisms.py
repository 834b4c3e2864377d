"""The explorer's view of an experiment's search mechanisms (strategy bilevel): each mechanism's
source, spec and status, its validation ladder, its hook calls (counts and the latest, with what
each returned and did), its judgement, the active set over time, Level 1.5's parameters and the
Level-2 conversations. Plain SQL over the bilevel tables (migration 0006_bilevel_mechanisms)."""

from __future__ import annotations

import json
from typing import Any

from metaopt.core.errors import NotFound
from metaopt.traces.store import Store

CALLS = 200


def _j(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v


def mechanisms(store: Store, experiment_id: str) -> dict[str, Any]:
    if not store.rows("SELECT 1 FROM experiments WHERE experiment_id = ?", [experiment_id]):
        raise NotFound(f"no experiment {experiment_id!r} in store {store.path}")
    p = [experiment_id]
    mechs = store.rows("SELECT mechanism_hash, name, origin, status, status_reason, source, spec, session_id, trial, "
                       "created_at FROM mechanisms WHERE experiment_id = ? ORDER BY created_at", p)
    checks = store.rows("SELECT mechanism_hash, step, attempt, ok, reason, detail, checked_at FROM mechanism_checks "
                        "WHERE experiment_id = ? ORDER BY checked_at", p)
    counts = store.rows("SELECT mechanism_hash, hook, status, count(*) AS n FROM mechanism_calls WHERE experiment_id = ?"
                        " GROUP BY ALL ORDER BY hook, status", p)
    calls = store.rows("SELECT mechanism_hash, mechanism, iteration, candidate_id, hook, status, output, error, effect, "
                       "ms FROM mechanism_calls WHERE experiment_id = ? AND hook <> 'state_dict' "
                       f"ORDER BY called_at DESC LIMIT {CALLS}", p)
    judged = store.rows("SELECT mechanism_hash, iteration, outcome, rule, reason, windows, n_pairs, mean_diff, ci_low, "
                        "ci_high FROM mechanism_judgements WHERE experiment_id = ? ORDER BY judged_at", p)
    for m in mechs:
        h = m["mechanism_hash"]
        m["spec"], m["trial"] = _j(m["spec"]), _j(m["trial"])
        m["checks"] = [{**c, "detail": _j(c["detail"])} for c in checks if c["mechanism_hash"] == h]
        m["calls"] = {f"{c['hook']} {c['status']}": c["n"] for c in counts if c["mechanism_hash"] == h}
        m["judgement"] = next(({**j, "windows": _j(j["windows"])} for j in judged if j["mechanism_hash"] == h), None)
    sets = store.rows("SELECT iteration, hashes, reason, changed_at FROM mechanism_active_sets WHERE experiment_id = ? "
                      "ORDER BY changed_at", p)
    params = store.rows("SELECT iteration, params, reason FROM search_params WHERE experiment_id = ? ORDER BY decided_at", p)
    sessions = store.rows("SELECT session_id, round, iteration, model, outcome, errors, spec, mechanism_hash, messages, "
                          "usd FROM level2_sessions WHERE experiment_id = ? ORDER BY round", p)
    return {"experiment_id": experiment_id, "mechanisms": mechs,
            "calls": [{**c, "output": _j(c["output"])} for c in calls],
            "active_sets": [{**s, "hashes": _j(s["hashes"])} for s in sets],
            "search_params": [{**r, "params": _j(r["params"])} for r in params],
            "level2_sessions": [{**s, "errors": _j(s["errors"]), "spec": _j(s["spec"]), "messages": _j(s["messages"])}
                                for s in sessions]}
