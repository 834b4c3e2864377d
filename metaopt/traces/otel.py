"""Tracer provider setup and the secret scrub shared by instrumentation and exporters.

One provider per process, built by `make_tracer_provider`: our store exporter behind a
SimpleSpanProcessor (export happens on span end, in the ending thread, nothing queued that a
crash could lose) and, when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
set, OTLP/HTTP behind a BatchSpanProcessor (a viewer is best effort: it must not slow the run).
Nothing here touches the global provider: callers (and tests) own theirs.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

SCOPE = "metaopt"
REDACTED = "[redacted]"
OTLP_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_MIN_SECRET_LEN = 8  # shorter values would redact ordinary words ("test", "1")

# The SDK default (128 attributes) silently evicts the oldest attributes, i.e. exactly the ones
# set at span creation. No value-length limit: a truncated JSON string attribute is unparseable.
SPAN_LIMITS = SpanLimits(
    max_span_attributes=1024, max_events=1024, max_event_attributes=1024,
    max_attribute_length=SpanLimits.UNSET, max_span_attribute_length=SpanLimits.UNSET,
)


class _SyncProcessor(SimpleSpanProcessor):
    """SimpleSpanProcessor whose force_flush reaches the exporter (the SDK's returns True and
    does nothing, which would leave a buffering exporter's rows unwritten)."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.span_exporter.force_flush(timeout_millis)


def otlp_configured() -> bool:
    return any(os.environ.get(k) for k in OTLP_ENV)


def make_tracer_provider(*, exporters: list[SpanExporter],
                         service_name: str = "metaopt") -> TracerProvider:
    """A provider exporting synchronously to each of `exporters` (our store exporter) and, when
    the OTLP endpoint env is set, in batches to OTLP/HTTP. Call `force_flush()` at each episode
    end and `shutdown()` at exit. The global provider is left alone."""
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}),
                              span_limits=SPAN_LIMITS)
    for exporter in exporters:
        provider.add_span_processor(_SyncProcessor(exporter))
    if otlp_configured():
        # Imported here: the exporter pulls in protobuf and requests, not needed otherwise.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def get_tracer(provider: TracerProvider | None = None) -> trace.Tracer:
    """Our tracer from `provider` (default: the global one, a no-op unless someone set it)."""
    return (provider or trace.get_tracer_provider()).get_tracer(SCOPE)


def secret_values() -> list[str]:
    """Values of env vars named *_API_KEY, longest first. Scans os.environ (~30 us): callers
    compute it once per episode or per export batch, not per attribute."""
    vals = {v for k, v in os.environ.items() if k.endswith("_API_KEY") and len(v) >= _MIN_SECRET_LEN}
    return sorted(vals, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    """`text` with every secret replaced by "[redacted]"."""
    for s in secrets:
        if s in text:
            text = text.replace(s, REDACTED)
    return text

