"""Read helpers over a Store, for `metaopt traces list|show|failures|sql` and the meta-agent.

All of them only read; they see what the span exporter has committed (a finished episode is
always committed, see traces/exporter.py). Rows come back as plain dicts / tuples.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from metaopt.core.errors import NotFound
from metaopt.traces.store import Store

_SPAN_COLS = ("span_id, trace_id, parent_span_id, name, operation_name, start_ns, duration_ms,"
              " status_code, status_message, error_type, tool_name, tool_call_id, request_model,"
              " response_model, input_tokens, output_tokens, reasoning_tokens, cost_usd, finish_reasons,"
              " CASE WHEN operation_name IN ('execute_tool', 'invoke_agent') THEN attributes END AS attributes")
_DIRECTION_ORDER = {"system": 0, "input": 1, "output": 2, "tool_call": 3, "tool_result": 4}


def list_trials(store: Store, run_id: str | None = None, status: str | None = None,
                limit: int = 50) -> list[dict[str, Any]]:
    """Trials, newest first: ids, status, score, failure mode, cost, tokens, trace id."""
    where, params = _where(run_id=run_id, status=status)
    return store.rows(
        "SELECT trial_id, run_id, task_id, attempt, agent, status, score, failure_mode, duration_s,"
        " cost_usd, input_tokens, output_tokens, trace_id, started_at FROM trials"
        f"{where} ORDER BY started_at DESC NULLS LAST, trial_id LIMIT ?", [*params, int(limit)])


def failures(store: Store, run_id: str | None = None) -> list[dict[str, Any]]:
    """Failed / error / timeout / tampered trials grouped by failure_mode (status when it has none), most
    frequent first: [{failure_mode, count, statuses, trial_ids}]."""
    where, params = _where(run_id=run_id)
    where = (where + " AND" if where else " WHERE") + " status IN ('failed', 'error', 'timeout', 'tampered')"
    return store.rows(
        "SELECT coalesce(failure_mode, status) AS failure_mode, count(*) AS count,"
        " list(DISTINCT status ORDER BY status) AS statuses, list(trial_id ORDER BY trial_id) AS trial_ids"
        f" FROM trials{where} GROUP BY 1 ORDER BY count DESC, failure_mode", params)


def sql(store: Store, query: str) -> tuple[list[str], list[tuple]]:
    """Run any SQL (the caller decides whether to allow writes): (column names, rows)."""
    cur = store.con.cursor()  # own cursor: a half-read result must not hold the main connection
    try:
        res = cur.execute(query)
        columns = [d[0] for d in res.description] if res.description else []
        return columns, res.fetchall() if res.description else []
    finally:
        cur.close()


def show_trial(store: Store, trial_id: str) -> dict[str, Any]:
    """One trial and its transcript, rebuilt from spans and messages.

    Returns {trial (the trials row, None while the trial is still running), trace_ids, agent
    (the invoke_agent span summary or None), transcript}. The transcript is ordered by time:
    {type: "system", parts} when the system prompt is (re)recorded, {type: "message",
    direction: "input"|"output", idx, role, parts, span_id} for each chat span's new input
    messages then its output (reasoning parts included), and {type: "tool", name, call_id,
    arguments, result, status, error_type, duration_ms, extra (metaopt.tool.*), span_id} per
    tool call. Raises NotFound (a KeyError) when neither a trial nor spans carry `trial_id`."""
    rows = store.rows("SELECT * FROM trials WHERE trial_id = ?", [trial_id])
    trial = rows[0] if rows else None
    # UNION, not OR: each side prunes on its own column (OR scans all spans: 15x slower at 1M)
    spans = store.rows(
        f"SELECT {_SPAN_COLS} FROM spans WHERE trial_id = ? UNION SELECT {_SPAN_COLS} FROM spans WHERE trace_id = ?"
        " ORDER BY start_ns, span_id", [trial_id, (trial or {}).get("trace_id") or ""])
    if trial is None and not spans:
        raise NotFound(f"no trial {trial_id!r} in store {store.path} (see `metaopt traces list`)")
    return _transcript(store, trial, spans)


def show_trace(store: Store, trace_id: str) -> dict[str, Any]:
    """Any trace (e.g. a meta-agent session) as show_trial returns a trial's, with trial None.
    Raises NotFound (a KeyError) when no span has `trace_id`."""
    spans = store.rows(f"SELECT {_SPAN_COLS} FROM spans WHERE trace_id = ? ORDER BY start_ns, span_id", [trace_id])
    if not spans:
        raise NotFound(f"no trace {trace_id!r} in store {store.path}")
    return _transcript(store, None, spans)


def _transcript(store: Store, trial: dict[str, Any] | None, spans: list[dict[str, Any]]) -> dict[str, Any]:
    trace_ids = sorted({s["trace_id"] for s in spans})
    parts = _message_parts(store, trace_ids)
    agent, transcript = None, []
    for s in spans:
        attrs = json.loads(s["attributes"]) if s["attributes"] else {}
        if s["operation_name"] == "invoke_agent":
            agent = {k: s[k] for k in ("span_id", "name", "status_code", "status_message",
                                       "error_type", "duration_ms", "input_tokens", "output_tokens",
                                       "reasoning_tokens", "cost_usd")}
            agent["outcome"] = attrs.get("metaopt.outcome")
        elif s["operation_name"] == "execute_tool":
            msgs = parts.get(s["span_id"], {})
            call = msgs.get(("tool_call", 0), {}).get("parts", [{}])[0]
            result = msgs.get(("tool_result", 0), {}).get("parts", [{}])[0]
            transcript.append({
                "type": "tool", "span_id": s["span_id"], "name": s["tool_name"],
                "call_id": s["tool_call_id"], "arguments": call.get("arguments"),
                "result": result.get("response"), "status": s["status_code"],
                "error_type": s["error_type"], "duration_ms": s["duration_ms"],
                "extra": {k[len("metaopt.tool."):]: v for k, v in attrs.items() if k.startswith("metaopt.tool.")},
            })
        elif s["span_id"] in parts:
            for (direction, idx), m in sorted(parts[s["span_id"]].items(),
                                              key=lambda kv: (_DIRECTION_ORDER.get(kv[0][0], 9), kv[0][1])):
                if direction == "system":
                    transcript.append({"type": "system", "span_id": s["span_id"], "parts": m["parts"]})
                    continue
                entry = {"type": "message", "direction": direction, "idx": idx, "role": m["role"],
                         "parts": m["parts"], "span_id": s["span_id"]}
                if direction == "output":
                    entry["finish_reasons"] = s["finish_reasons"]
                    entry["model"] = s["response_model"]
                transcript.append(entry)
    return {"trial": trial, "trace_ids": trace_ids, "agent": agent, "transcript": transcript}


def _message_parts(store: Store, trace_ids: list[str]) -> dict[str, dict[tuple[str, int], dict]]:
    """span_id -> (direction, idx) -> {role, parts} for every messages row of these traces."""
    out: dict[str, dict[tuple[str, int], dict]] = defaultdict(dict)
    if not trace_ids:
        return out
    rows = store.con.execute(
        "SELECT span_id, direction, idx, role, json FROM messages WHERE trace_id IN"
        f" ({', '.join('?' * len(trace_ids))}) ORDER BY span_id, direction, idx, part_idx",
        trace_ids).fetchall()
    for span_id, direction, idx, role, part in rows:
        m = out[span_id].setdefault((direction, idx), {"role": role, "parts": []})
        m["parts"].append(json.loads(part))
    return out


def _where(**filters: Any) -> tuple[str, list[Any]]:
    used = [(k, v) for k, v in filters.items() if v is not None]
    if not used:
        return "", []
    return " WHERE " + " AND ".join(f"{k} = ?" for k, _ in used), [v for _, v in used]
