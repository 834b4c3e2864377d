"""DuckDBSpanExporter: finished spans -> `spans` rows, message attributes -> `messages` rows.

Never raises: a failed write is logged, reported as FAILURE / False, and its batch dropped.

Durability: an appender flush costs ~1.6 ms, so writing each span as SimpleSpanProcessor delivers
it would cap ingest near 600 spans/s. Spans are buffered and written in one transaction when
`batch_rows` are pending, when an episode ends (an invoke_agent or local root span arrives), when
the oldest is older than `max_delay_s` (checked as spans arrive), and on force_flush / shutdown
(traces.otel's provider passes force_flush on; the SDK's SimpleSpanProcessor alone would not).
A finished episode is always on disk; a crash loses at most the spans of running episodes.
`batch_rows=1` writes through: each span is committed before `export` returns.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode

from metaopt.traces.otel import scrub, secret_values
from metaopt.traces.store import Store
from metaopt.traces.tables import SPAN_COLUMNS, append_spans, check_span_columns

log = logging.getLogger(__name__)

# Hot attribute -> column. Values are copied: `attributes` keeps them too.
HOT_STR = {
    "metaopt.run.id": "run_id", "metaopt.trial.id": "trial_id", "metaopt.task.id": "task_id",
    "gen_ai.agent.version": "harness_version", "gen_ai.operation.name": "operation_name",
    "gen_ai.provider.name": "provider", "gen_ai.request.model": "request_model",
    "gen_ai.response.model": "response_model", "gen_ai.agent.name": "agent_name",
    "gen_ai.conversation.id": "conversation_id", "gen_ai.tool.name": "tool_name",
    "gen_ai.tool.call.id": "tool_call_id", "error.type": "error_type",
}
HOT_INT = {
    "gen_ai.usage.input_tokens": "input_tokens", "gen_ai.usage.output_tokens": "output_tokens",
    "gen_ai.usage.reasoning.output_tokens": "reasoning_tokens", "gen_ai.usage.cache_read.input_tokens":
    "cache_read_tokens", "gen_ai.usage.cache_creation.input_tokens": "cache_write_tokens"}
# Content attributes live in `messages` (text + the part as JSON), not again in `attributes`:
# strings cost the appender ~8 ns/byte, and content is most of a span's bytes.
CONTENT_KEYS = ("gen_ai.system_instructions", "gen_ai.input.messages", "gen_ai.output.messages",
                "gen_ai.tool.call.arguments", "gen_ai.tool.call.result")
_STR_SLOTS = [(k, SPAN_COLUMNS.index(c)) for k, c in HOT_STR.items()]
_INT_SLOTS = [(k, SPAN_COLUMNS.index(c)) for k, c in HOT_INT.items()]
_NAMES: dict[Any, str] = {e: e.name for e in (*SpanKind, *StatusCode)}  # Enum.name is a slow descriptor


# One encoder: json.dumps(..., **kwargs) builds a new encoder per call (µs each, per value).
# allow_nan=False: DuckDB's JSON type rejects NaN, which would fail the whole batch.
_encode = json.JSONEncoder(ensure_ascii=False, default=str, allow_nan=False).encode


def _dumps(v: Any) -> str:
    try:
        return _encode(v)
    except ValueError:  # a NaN / inf float somewhere: spell non-finite numbers as strings
        return _encode(_finite(v))


def _finite(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    return str(v) if isinstance(v, float) and not math.isfinite(v) else v


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    """A plain dict copy: lookups through the SDK's attributes proxy cost ~0.3 µs each."""
    inner = getattr(getattr(span, "_attributes", None), "_dict", None)
    return dict(inner) if isinstance(inner, dict) else dict(span.attributes or {})


def _loads(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v


def _int(v: Any) -> int | None:
    ok = isinstance(v, (int, float)) or isinstance(v, str) and v.lstrip("-").isdigit()
    return int(v) if ok else None


def span_row(span: ReadableSpan, a: dict[str, Any], resource_json: str | None) -> list[Any]:
    """The `spans` row of `span` (attributes `a`), in SPAN_COLUMNS order (unscrubbed)."""
    start, end = span.start_time, span.end_time
    res = span.resource.attributes if span.resource else {}
    scope = span.instrumentation_scope
    ctx, parent, status = span.context, span.parent, span.status
    if ctx is None:
        raise ValueError(f"span {span.name!r} has no span context")
    row: list[Any] = [
        format(ctx.trace_id, "032x"), format(ctx.span_id, "016x"),
        format(parent.span_id, "016x") if parent else None, span.name,
        _NAMES[span.kind], start, end, (end - start) / 1e6 if start and end else None,
        _NAMES[status.status_code], status.description, res.get("service.name"),
        scope.name if scope else None,
    ] + [None] * (len(SPAN_COLUMNS) - 12)
    for key, slot in _STR_SLOTS:
        if (v := a.get(key)) is not None:
            row[slot] = str(v)
    for key, slot in _INT_SLOTS:
        row[slot] = _int(a.get(key))
    if (fr := a.get("gen_ai.response.finish_reasons")) is not None:
        row[29] = [fr] if isinstance(fr, str) else [str(x) for x in fr]
    if (cost := a.get("metaopt.cost_usd")) is not None:
        row[31] = float(cost)
    rest = a
    for k in CONTENT_KEYS:
        if k in rest:
            rest = rest if rest is not a else dict(a)
            del rest[k]
    row[32] = _dumps(rest)
    row[33] = resource_json
    if span.events:
        row[34] = _dumps([{"name": e.name, "ts_ns": e.timestamp, "attributes": dict(e.attributes or {})}
                          for e in span.events])
    return row


def _part_text(p: dict[str, Any]) -> str | None:
    kind = p.get("type")
    value = p.get({"tool_call": "arguments", "tool_call_response": "response"}.get(str(kind), "content"))
    if value is None:  # an unknown part type without content: search its JSON
        return None if kind in ("text", "reasoning", "tool_call", "tool_call_response") else _dumps(p)
    return value if isinstance(value, str) else _dumps(value)


def message_rows(a: dict[str, Any], trace_id: str, span_id: str) -> list[list[Any]]:
    """The `messages` rows of a span with attributes `a` (unscrubbed): one per part of the
    system instructions and of each input / output message, and one each for a tool span's
    arguments and result. Content that is not the JSON it should be becomes a "raw" row."""
    trial = _s(a.get("metaopt.trial.id"))
    out: list[list[Any]] = []

    def add(direction: str, idx: int, role: Any, part_idx: int, p: Any, text: Any = None, tool: Any = None) -> None:
        if not isinstance(p, dict):
            p = {"type": "raw", "content": p if isinstance(p, str) else _dumps(p)}
        name = tool or (p.get("name") if p.get("type") == "tool_call" else None)
        out.append([trace_id, span_id, trial, direction, idx, _s(role), part_idx, _s(p.get("type")),
                    text if text is not None else _part_text(p), _s(p.get("id")), _s(name), _dumps(p)])

    def messages(key: str, direction: str, offset: int) -> int:
        try:
            msgs = _loads(a[key])
            if direction == "system":  # a list of parts, not of messages
                msgs = [{"role": "system", "parts": msgs if isinstance(msgs, list) else [msgs]}]
            for i, m in enumerate(msgs):
                for j, p in enumerate(m.get("parts") or []):
                    add(direction, offset + i, m.get("role"), j, p)
            return len(msgs)
        except (ValueError, TypeError, AttributeError):
            add(direction, offset, None, 0, str(a[key]))
            return 1

    if "gen_ai.system_instructions" in a:
        messages("gen_ai.system_instructions", "system", 0)
    # idx is the position in the conversation (system excluded): outputs follow the inputs.
    position = _int(a.get("metaopt.input.offset")) or 0
    if "gen_ai.input.messages" in a:
        position += messages("gen_ai.input.messages", "input", position)
    if "gen_ai.output.messages" in a:
        messages("gen_ai.output.messages", "output", position)
    call_id, tool = _s(a.get("gen_ai.tool.call.id")), _s(a.get("gen_ai.tool.name"))
    if "gen_ai.tool.call.arguments" in a:
        raw = a["gen_ai.tool.call.arguments"]
        try:
            args = _loads(raw)
        except ValueError:  # redacted, or not JSON: keep the text
            args = raw
        add("tool_call", 0, "assistant", 0, {"type": "tool_call", "id": call_id, "name": tool, "arguments": args},
            raw if isinstance(raw, str) else _dumps(raw))
    if "gen_ai.tool.call.result" in a:
        res = str(a["gen_ai.tool.call.result"])
        add("tool_result", 0, "tool", 0, {"type": "tool_call_response", "id": call_id, "response": res}, res, tool)
    return out



class DuckDBSpanExporter(SpanExporter):
    """Writes spans into `store` through its own cursor (exports arrive from worker threads;
    a lock serialises them). See the module docstring for when rows reach disk.

    Counters: `exported` (span rows written), `failed` (spans lost to errors),
    `dropped_attributes` / `dropped_events` (what the SDK's span limits discarded; a warning is
    logged per span, since a dropped attribute is silently missing data)."""

    def __init__(self, store: Store, *, batch_rows: int = 1000, max_delay_s: float = 1.0):
        self._cur = store.con.cursor()
        self._lock = threading.Lock()
        self._pending: list[ReadableSpan] = []
        self._oldest, self._closed = 0.0, False
        self.batch_rows, self.max_delay_s = max(1, batch_rows), max_delay_s
        self.exported = self.failed = self.dropped_attributes = self.dropped_events = 0
        # One Resource per provider: dump it once. The Resource is kept so its id is not reused.
        self._resource_json: dict[int, tuple[Any, str | None]] = {}
        check_span_columns(self._cur)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        with self._lock:
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending.extend(spans)
            if (len(self._pending) < self.batch_rows and not any(map(_ends_episode, spans))
                    and time.monotonic() - self._oldest < self.max_delay_s):
                return SpanExportResult.SUCCESS
            return SpanExportResult.SUCCESS if self._flush_locked() else SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if not self._lock.acquire(timeout=timeout_millis / 1000):
            log.error("span store flush timed out after %d ms waiting for the writer", timeout_millis)
            return False
        try:
            return self._flush_locked()
        finally:
            self._lock.release()

    def shutdown(self) -> None:
        if self._closed:
            return
        self.force_flush()
        self._closed = True
        with contextlib.suppress(Exception):  # the store may be closed already; nothing is left
            self._cur.close()

    def _flush_locked(self) -> bool:
        batch, self._pending = self._pending, []
        if not batch:
            return True
        secrets = secret_values()
        rows: list[list[Any]] = []
        msgs: list[list[Any]] = []  # filled by _row
        for span in batch:
            try:
                rows.append(self._row(span, msgs, secrets))
            except Exception:
                self.failed += 1
                log.exception("span %r could not be converted; skipped", getattr(span, "name", span))
        try:
            append_spans(self._cur, rows, msgs)
        except Exception as exc:  # noqa: BLE001 - a failed write loses this batch of spans, never the run
            self.failed += len(rows)
            log.error("span store write failed, %d spans lost: %s", len(rows), exc)
            return False
        self.exported += len(rows)
        return True

    def _row(self, span: ReadableSpan, msgs: list[list[Any]], secrets: list[str]) -> list[Any]:
        if span.dropped_attributes or span.dropped_events:
            self.dropped_attributes += span.dropped_attributes
            self.dropped_events += span.dropped_events
            log.warning("span %s dropped %d attributes and %d events (span limits too low)",
                        span.name, span.dropped_attributes, span.dropped_events)
        res = span.resource
        if (cached := self._resource_json.get(id(res))) is None:
            cached = self._resource_json[id(res)] = (res, _dumps(dict(res.attributes)) if res else None)
        a = _attributes(span)
        row = span_row(span, a, cached[1])
        new = message_rows(a, row[0], row[1])
        if secrets:  # backstop: instrumentation scrubs at the source, others may not
            row = [scrub(v, secrets) if isinstance(v, str) else v for v in row]
            new = [[scrub(v, secrets) if isinstance(v, str) else v for v in m] for m in new]
        msgs.extend(new)
        return row


def _ends_episode(span: ReadableSpan) -> bool:
    return (span.parent is None or span.parent.is_remote
            or (span.attributes or {}).get("gen_ai.operation.name") == "invoke_agent")
