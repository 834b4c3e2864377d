"""Spans across machines: collected in memory where a trial runs, written where the store is.

Only one process may write the DuckDB file, so a trial that runs on another machine (a Ray node)
must not export into it. There, `collecting_tracing()` gives a Tracing whose spans are kept in
memory as plain, JSON-round-trippable dicts (`span_to_dict`); they travel back with the trial's
result, and the writer hands them to `ingest(tracing, spans)`, which rebuilds each span and
passes it to the writer's own span processors: the same DuckDB exporter (and OTLP, when set) that
live spans reach, so the rows are the same as if the trial had run in the writer's process.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from metaopt.traces.otel import SPAN_LIMITS, _SyncProcessor
from metaopt.traces.tracing import Tracing

FORMAT = 1  # bump when the dict layout changes; ingest refuses other versions


class CollectingExporter(SpanExporter):
    """Keeps finished spans as dicts (span_to_dict) until `take()`. Thread-safe; never raises."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[dict[str, Any]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        converted = [span_to_dict(s) for s in spans]
        with self._lock:
            self._spans.extend(converted)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def take(self) -> list[dict[str, Any]]:
        """Every span collected so far, oldest first; the collector is emptied."""
        with self._lock:
            out, self._spans = self._spans, []
        return out


def collecting_tracing(service_name: str = "metaopt") -> tuple[Tracing, CollectingExporter]:
    """A Tracing for a process that must not write the store: the same resource and span limits
    as traces.otel.make_tracer_provider, spans kept by the returned collector. No OTLP here: the
    writer re-exports ingested spans to OTLP itself, once."""
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}), span_limits=SPAN_LIMITS)
    collector = CollectingExporter()
    provider.add_span_processor(_SyncProcessor(collector))
    return Tracing(provider), collector


def ingest(tracing: Tracing, spans: list[dict[str, Any]]) -> int:
    """Write shipped spans through `tracing`'s span processors, as if they had ended here, and
    flush them to the store. Returns how many were handed on. Raises ValueError for a payload
    of another format version (a node running another metaopt)."""
    rebuilt = [span_from_dict(d) for d in spans]
    # The provider's processors are the exporters live spans reach (DuckDB, OTLP when set); the
    # SDK keeps them behind `_active_span_processor` and offers no public way to feed them.
    processor = tracing.provider._active_span_processor
    for span in rebuilt:
        processor.on_end(span)
    if rebuilt:
        tracing.provider.force_flush()
    return len(rebuilt)


def _ctx(c: SpanContext | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"trace_id": format(c.trace_id, "032x"), "span_id": format(c.span_id, "016x"), "remote": c.is_remote,
            "flags": int(c.trace_flags), "state": list(c.trace_state.items()) if c.trace_state else []}


def _unctx(d: dict[str, Any] | None) -> SpanContext | None:
    return None if d is None else _span_context(d)


def _span_context(d: dict[str, Any]) -> SpanContext:
    return SpanContext(int(d["trace_id"], 16), int(d["span_id"], 16), d["remote"], TraceFlags(d["flags"]),
                       TraceState([tuple(kv) for kv in d["state"]]))


def _attrs(a: Any) -> dict[str, Any]:
    """Attribute values as JSON values: sequences become lists (BoundedAttributes makes them
    tuples again on the way in)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in (a or {}).items()}


def _bounded(a: dict[str, Any], dropped: int) -> BoundedAttributes:
    out = BoundedAttributes(maxlen=None, attributes=a, immutable=True)
    out.dropped = dropped
    return out


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as a JSON-serialisable dict; span_from_dict rebuilds it."""
    scope, res = span.instrumentation_scope, span.resource
    return {
        "v": FORMAT, "name": span.name, "context": _ctx(span.context), "parent": _ctx(span.parent),
        "kind": span.kind.name, "status": [span.status.status_code.name, span.status.description],
        "start": span.start_time, "end": span.end_time,
        "attributes": _attrs(span.attributes), "dropped_attributes": span.dropped_attributes,
        "events": [{"name": e.name, "ts": e.timestamp, "attributes": _attrs(e.attributes)} for e in span.events],
        "dropped_events": span.dropped_events,
        "links": [{"context": _ctx(link.context), "attributes": _attrs(link.attributes)} for link in span.links],
        "resource": {"attributes": _attrs(res.attributes), "schema_url": res.schema_url} if res else None,
        "scope": ({"name": scope.name, "version": scope.version, "schema_url": scope.schema_url,
                   "attributes": _attrs(scope.attributes)} if scope else None),
    }


_RESOURCES: dict[tuple, Resource] = {}  # one Resource object per distinct resource, as one provider has
_RES_LOCK = threading.Lock()


def _resource(d: dict[str, Any] | None) -> Resource | None:
    if d is None:
        return None
    key = (repr(sorted(d["attributes"].items())), d["schema_url"])
    with _RES_LOCK:
        if key not in _RESOURCES:
            _RESOURCES[key] = Resource(d["attributes"], d["schema_url"])
        return _RESOURCES[key]


def span_from_dict(d: dict[str, Any]) -> ReadableSpan:
    if d.get("v") != FORMAT:
        raise ValueError(f"shipped span in format {d.get('v')!r}, this metaopt reads format {FORMAT} "
                         f"(run the same metaopt version on every node)")
    s = d["scope"]
    events = BoundedList.from_seq(None, [Event(e["name"], _bounded(e["attributes"], 0), e["ts"], limit=None)
                                         for e in d["events"]])
    events.dropped = d["dropped_events"]
    span = ReadableSpan(
        name=d["name"], context=_unctx(d["context"]), parent=_unctx(d["parent"]), resource=_resource(d["resource"]),
        attributes=_bounded(d["attributes"], d["dropped_attributes"]), events=events,
        links=[Link(_span_context(link["context"]), link["attributes"]) for link in d["links"]], kind=SpanKind[d["kind"]],
        status=Status(StatusCode[d["status"][0]], d["status"][1]), start_time=d["start"], end_time=d["end"],
        instrumentation_scope=InstrumentationScope(s["name"], s["version"], s["schema_url"], s["attributes"]) if s else None,
    )
    return span
