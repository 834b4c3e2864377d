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


# -- for the meta-agent: the failing trials it may read, and what their spans show -------------------
def _marks(ids: list[Any]) -> str:
    return ", ".join("?" * len(ids))


def task_attempts(store: Store, run_id: str, task_id: str) -> list[dict[str, Any]]:
    """The attempts of one task in a run: attempt number and start time (an importer's dedup key)."""
    return store.rows("SELECT attempt, started_at FROM trials WHERE run_id = ? AND task_id = ?", [run_id, task_id])


def trial_scores(store: Store, *, run_id: str | None = None, candidate_id: str | None = None,
                 splits: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """{task_id, attempt, status, score, agent} of one run's or one candidate's trials (of `splits`
    only, when given), by task and attempt: what a paired comparison (meta_agent.compare) reads."""
    where, params = _where(run_id=run_id, candidate_id=candidate_id)
    assert where, "name a run or a candidate"
    if splits:
        where, params = where + f" AND split IN ({_marks(list(splits))})", [*params, *splits]
    return store.rows(f"SELECT task_id, attempt, status, score, agent FROM trials{where} ORDER BY task_id, attempt",
                      params)


def failed_tool_calls(store: Store, trial_ids: list[str], limit: int) -> list[dict[str, Any]]:
    """Per tool, the failed calls (timeouts aside) in `trial_ids` (non-empty): count, tasks and the
    first result it gave; most failures first."""
    return store.rows(
        "SELECT s.tool_name AS tool, count(*) AS n, list(DISTINCT s.task_id) AS tasks,"
        " first(m.text ORDER BY s.start_ns) AS said FROM spans s"
        " LEFT JOIN messages m ON m.span_id = s.span_id AND m.part_type = 'tool_call_response'"
        f" WHERE s.operation_name = 'execute_tool' AND s.trial_id IN ({_marks(trial_ids)})"
        "   AND (s.error_type IS NOT NULL OR s.status_code = 'ERROR')"
        "   AND coalesce(s.attributes->>'$.\"metaopt.tool.timed_out\"', 'false') <> 'true'"
        " GROUP BY 1 ORDER BY n DESC, tool LIMIT ?", [*trial_ids, limit])


def failed_calls_by_caller(store: Store, trial_ids: list[str]) -> list[dict[str, Any]]:
    """The failed tool calls in `trial_ids` (non-empty) per tool and per the tool whose call ran them
    (`via`: an agent tool that delegated to a role; None for the episode's own role); most first."""
    return store.rows(
        "SELECT s.tool_name AS tool, p.tool_name AS via, count(*) AS n FROM spans s"
        " LEFT JOIN spans p ON p.span_id = s.parent_span_id AND p.trial_id = s.trial_id"
        f" WHERE s.operation_name = 'execute_tool' AND s.trial_id IN ({_marks(trial_ids)})"
        "   AND (s.error_type IS NOT NULL OR s.status_code = 'ERROR') GROUP BY ALL ORDER BY n DESC, tool", trial_ids)


def call_arguments(store: Store, trial_ids: list[str], tool: str, limit: int = 20) -> list[str]:
    """The arguments (JSON text) of up to `limit` calls to `tool` in `trial_ids` (non-empty)."""
    return [r["text"] for r in store.rows(
        "SELECT m.text FROM messages m JOIN spans s ON s.span_id = m.span_id AND s.trace_id = m.trace_id"
        f" WHERE s.operation_name = 'execute_tool' AND s.tool_name = ? AND s.trial_id IN ({_marks(trial_ids)})"
        " AND m.direction = 'tool_call' ORDER BY ALL LIMIT ?", [tool, *trial_ids, limit])]


def trials_with_message(store: Store, trial_ids: list[str], text: str) -> dict[str, Any]:
    """How many of `trial_ids` (non-empty) hold a message part whose text is `text`, and their tasks."""
    marks = _marks(trial_ids)
    [row] = store.rows("SELECT count(DISTINCT trial_id) AS n, list(DISTINCT task_id) AS tasks FROM spans"
                       f" WHERE trial_id IN ({marks}) AND span_id IN (SELECT span_id FROM messages"
                       f" WHERE trial_id IN ({marks}) AND text = ?)", [*trial_ids, *trial_ids, text])
    return row


def run_rows(store: Store, table: str, run_id: str) -> list[dict[str, Any]]:
    """Every row of `table` (runs, trials, spans or messages) that belongs to `run_id`, in a stable order."""
    assert table in ("runs", "trials", "spans", "messages"), table
    where = "trial_id IN (SELECT trial_id FROM trials WHERE run_id = ?)" if table == "messages" else "run_id = ?"
    return store.rows(f"SELECT * FROM {table} WHERE {where} ORDER BY ALL", [run_id])


def trials_by_id(store: Store, trial_ids: list[str]) -> list[dict[str, Any]]:
    """The trials among `trial_ids` (non-empty), by task and attempt."""
    return store.rows("SELECT trial_id, task_id, attempt, status, score, failure_mode, error, tests, trace_id,"
                      f" test_output FROM trials WHERE trial_id IN ({_marks(trial_ids)}) ORDER BY task_id, attempt",
                      trial_ids)


def search_messages(store: Store, trial_ids: list[str], trace_ids: list[str], like: str, limit: int) -> list[dict[str, Any]]:
    """Message parts of these trials or traces (both non-empty) whose text matches the ILIKE
    pattern `like`, in conversation order: at most `limit` rows."""
    return store.rows(
        "SELECT m.span_id, coalesce(m.trial_id, t.trial_id) AS trial_id, m.direction, m.role, m.part_type,"
        " m.tool_name, m.tool_call_id, m.text FROM messages m LEFT JOIN trials t ON t.trace_id = m.trace_id"
        f" WHERE (m.trial_id IN ({_marks(trial_ids)}) OR m.trace_id IN ({_marks(trace_ids)}))"
        " AND m.text ILIKE ? ORDER BY m.trace_id, m.idx NULLS FIRST, m.span_id, m.part_idx LIMIT ?",
        [*trial_ids, *trace_ids, like, limit])


def agent_outcomes(store: Store, trace_ids: list[str]) -> list[dict[str, Any]]:
    """{trial_id, outcome (metaopt.outcome)} of the invoke_agent spans of these traces (non-empty)."""
    return store.rows(
        "SELECT t.trial_id, s.attributes->>'$.\"metaopt.outcome\"' AS outcome FROM spans s"
        " JOIN trials t ON t.trace_id = s.trace_id WHERE s.operation_name = 'invoke_agent'"
        f" AND s.trace_id IN ({_marks(trace_ids)})", trace_ids)


def span_ids(store: Store, trial_ids: list[str], trace_ids: list[str]) -> set[str]:
    """Ids of the spans of these trials or traces (both non-empty)."""
    return {r["span_id"] for r in store.rows(
        f"SELECT span_id FROM spans WHERE trial_id IN ({_marks(trial_ids)}) OR trace_id IN ({_marks(trace_ids)})",
        [*trial_ids, *trace_ids])}


def knob_causes(store: Store, trial_ids: list[str]) -> list[dict[str, Any]]:
    """Knob-shaped causes in these trials' (non-empty) spans, unordered: {cause (timeout | truncated
    per tool, turn_limit; None for other tool spans), target (tool name), n, spans, tasks, most (the
    longest output before truncation, in characters; None for turn_limit)}."""
    marks = _marks(trial_ids)
    return store.rows(
        "SELECT CASE WHEN attributes->>'$.\"metaopt.tool.timed_out\"' = 'true' THEN 'timeout'"
        "            WHEN attributes->>'$.\"metaopt.tool.truncated\"' = 'true' THEN 'truncated' END AS cause,"
        "       tool_name AS target, count(*) AS n, list(span_id ORDER BY start_ns) AS spans,"
        "       list(DISTINCT task_id) AS tasks,"
        "       max(TRY_CAST(attributes->>'$.\"metaopt.tool.output_chars\"' AS BIGINT)) AS most"
        f" FROM spans WHERE operation_name = 'execute_tool' AND trial_id IN ({marks}) GROUP BY 1, 2"
        " UNION ALL"
        " SELECT 'turn_limit', '', count(*), list(span_id ORDER BY start_ns), list(DISTINCT task_id), NULL FROM spans"
        f" WHERE operation_name = 'invoke_agent' AND trial_id IN ({marks})"
        "   AND attributes->>'$.\"metaopt.outcome\"' = 'turn_limit' HAVING count(*) > 0",
        [*trial_ids, *trial_ids])


def meta_agent_transcripts(store: Store, experiment_id: str, most: int) -> list[dict[str, Any]]:
    """{trace_id, t (role: text lines, 400 characters a part)} of the meta-agent's last `most`
    traced sessions of the experiment, newest first."""
    return store.rows(
        "SELECT m.trace_id, string_agg(m.role || ': ' || left(m.text, 400), '\n' ORDER BY m.idx, m.part_idx) AS t "
        "FROM messages m JOIN spans s ON s.trace_id = m.trace_id AND s.operation_name = 'invoke_agent' "
        "WHERE s.attributes->>'$.\"metaopt.experiment_id\"' = ? AND s.attributes->>'$.\"gen_ai.agent.name\"' = "
        "'meta-agent' GROUP BY 1 ORDER BY max(s.start_ns) DESC LIMIT ?", [experiment_id, most])


class TrialSpans:
    """The spans and messages of a set of trials (what meta_agent.liveness checks), queried lazily."""

    def __init__(self, store: Store, trial_ids: list[str]):
        self.store, self.ids = store, list(dict.fromkeys(trial_ids)) or [""]
        self.marks = _marks(self.ids)

    def any(self) -> bool:
        return bool(self.store.rows(f"SELECT 1 FROM spans WHERE trial_id IN ({self.marks}) LIMIT 1", self.ids))

    def tool_calls(self, name: str) -> list[dict[str, Any]]:
        """{span_id, trial_id, attributes (JSON text)} of the calls of tool `name`, in time order."""
        return self.store.rows(f"SELECT span_id, trial_id, attributes FROM spans WHERE trial_id IN ({self.marks})"
                               " AND operation_name = 'execute_tool' AND tool_name = ? ORDER BY start_ns",
                               [*self.ids, name])

    def chats(self, system_sha256: str | None = None) -> list[dict[str, Any]]:
        """{span_id, trial_id} of the chat spans (only those whose system prompt has this sha256)."""
        where = " AND attributes->>'$.\"metaopt.system.sha256\"' = ?" if system_sha256 is not None else ""
        return self.store.rows(f"SELECT span_id, trial_id FROM spans WHERE trial_id IN ({self.marks})"
                               f" AND operation_name = 'chat'{where} ORDER BY start_ns",
                               [*self.ids, *([system_sha256] if system_sha256 is not None else [])])

    def first_user_messages(self) -> list[dict[str, Any]]:
        """{span_id, trial_id, text} of each conversation's first user message."""
        return self.store.rows(f"SELECT span_id, trial_id, text FROM messages WHERE trial_id IN ({self.marks})"
                               " AND direction = 'input' AND idx = 0 AND role = 'user'", self.ids)

    def tool_results(self, tool: str, text: str) -> list[dict[str, Any]]:
        """{span_id, trial_id, text} of the results of tool `tool` that read exactly `text`."""
        return self.store.rows(f"SELECT span_id, trial_id, text FROM messages WHERE trial_id IN ({self.marks})"
                               " AND direction = 'tool_result' AND tool_name = ? AND text = ?", [*self.ids, tool, text])

    def episodes(self) -> list[dict[str, Any]]:
        """{trial_id, span_id, duration_ms, outcome, chats (model calls)} per invoke_agent span."""
        return self.store.rows(
            "SELECT a.trial_id, a.span_id, a.duration_ms, a.attributes->>'$.\"metaopt.outcome\"' AS outcome,"
            " (SELECT count(*) FROM spans c WHERE c.trace_id = a.trace_id AND c.operation_name = 'chat') AS chats"
            f" FROM spans a WHERE a.trial_id IN ({self.marks}) AND a.operation_name = 'invoke_agent'", self.ids)
