"""Span ingest into DuckDB and tracing overhead per tool call, on this machine.

    python -m perf.span_ingest [--n 200000] [--tool-calls 5000] [--db PATH]

Prints:
  - spans/s ingested through DuckDBSpanExporter.export + force_flush, for finished
    `execute_tool` spans with small arguments and results (each span also yields 2 messages
    rows), as SimpleSpanProcessor delivers them: one span per export call. Spans are created
    beforehand, so this measures the exporter and DuckDB, not the SDK.
  - the same for `chat` spans carrying ~2 KB of message content (4 messages rows each).
  - the SDK's own cost per span (calibration: compare machines by it),
  - tracing overhead per tool call (tool_span + set_result with small args/result, inside an
    agent_span), in microseconds: with a no-op exporter (SDK + our wrapper) and end to end with
    the DuckDB exporter (amortised flushes included).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from metaopt.task_agent.messages import (
    Message,
    ModelResponse,
    ModelSettings,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from metaopt.traces.exporter import DuckDBSpanExporter
from metaopt.traces.instrument import TracedModel, agent_span, tool_span
from metaopt.traces.otel import get_tracer, make_tracer_provider
from metaopt.traces.store import Store


class _Nop(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS


class _Canned:
    """A model answering instantly with a fixed ~1 KB response (reasoning + text + tool call)."""

    name, provider = "fake/canned", "fake"

    def generate(self, messages, tools, settings):
        msg = Message(role="assistant", parts=[ReasoningPart(content="think " * 80), TextPart(content="ok " * 80),
                                               ToolCallPart(id=f"c{len(messages)}", name="bash", arguments={"command": "ls -la"})])
        return ModelResponse(message=msg, usage=Usage(input_tokens=500, output_tokens=200), cost_usd=0.001,
                             finish_reason="tool_call", model="canned-1", provider="fake")


def _episode_spans(n: int, kind: str) -> list[ReadableSpan]:
    """At least `n` finished spans of `kind` (tool | chat), in episodes of 50."""
    mem = InMemorySpanExporter()
    tracer = get_tracer(make_tracer_provider(exporters=[mem]))
    model = TracedModel(_Canned(), tracer)
    made = 0
    while made < n:
        with agent_span(tracer, agent_name="bench", harness_version="h", conversation_id=f"c{made}", run_id="bench",
                        trial_id=f"bench/{made}", task_id="t", provider="fake"):
            history = [Message.system("You are a benchmark."), Message.user("go " * 100)]
            for i in range(50):
                if kind == "tool":
                    with tool_span(tracer, "bash", f"call_{i}", {"command": f"ls -la /app/{i}"}) as t:
                        t.set_result(f"total {i}\nfile_{i}.txt", extra={"exit_code": 0, "duration": 0.01})
                else:
                    r = model.generate(history, [], ModelSettings(model="fake/canned"))
                    history += [r.message, Message.user("next " * 100)]
        made += 50
    return [s for s in mem.get_finished_spans() if s.attributes.get("gen_ai.operation.name") != "invoke_agent"][:n]


def ingest_rate(spans: list[ReadableSpan], db: Path) -> tuple[float, int]:
    # The pre-built spans are the benchmark's, not the exporter's: keep the cyclic GC from
    # walking them again and again (in a run they are freed as they are exported).
    gc.collect()
    gc.freeze()
    with Store(db) as store:
        exporter = DuckDBSpanExporter(store)
        t0 = time.perf_counter()
        for s in spans:
            exporter.export((s,))
        exporter.force_flush()
        elapsed = time.perf_counter() - t0
        msgs = store.con.execute("SELECT count(*) FROM messages").fetchone()[0]
        assert exporter.failed == 0 and exporter.exported == len(spans)
    gc.unfreeze()
    return len(spans) / elapsed, msgs


def tool_overhead_us(exporter: SpanExporter, n: int) -> float:
    tracer = get_tracer(make_tracer_provider(exporters=[exporter]))
    samples = []
    with agent_span(tracer, agent_name="bench", harness_version="h", conversation_id="c", run_id="bench",
                    trial_id="bench/overhead", task_id="t", provider="fake"):
        for i in range(n):
            t0 = time.perf_counter()
            with tool_span(tracer, "bash", f"call_{i}", {"command": "ls"}) as t:
                t.set_result("a.txt\nb.txt", extra={"exit_code": 0})
            samples.append(time.perf_counter() - t0)
    return statistics.mean(samples) * 1e6


def bare_span_us(n: int) -> float:
    """The SDK's own cost for one span with one attribute: scales the figures to a machine."""
    tracer = get_tracer(make_tracer_provider(exporters=[_Nop()]))
    t0 = time.perf_counter()
    for _ in range(n):
        with tracer.start_as_current_span("s", attributes={"a": 1}):
            pass
    return (time.perf_counter() - t0) / n * 1e6


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000, help="tool spans to ingest")
    ap.add_argument("--tool-calls", type=int, default=5000, help="tool calls for the overhead figure")
    ap.add_argument("--db", type=Path, default=None, help="store file (default: a temporary one)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = args.db or Path(tmp) / "ingest.duckdb"
        spans = _episode_spans(args.n, "tool")
        rate, msgs = ingest_rate(spans, base)
        print(f"{'ingest execute_tool spans (small args/result)':<52} {rate:10,.0f} spans/s  "
              f"({len(spans):,} spans, {msgs:,} messages rows)")
        del spans
        chats = _episode_spans(max(1000, args.n // 10), "chat")
        rate, msgs = ingest_rate(chats, base.with_name(base.stem + "-chat.duckdb"))
        print(f"{'ingest chat spans (~2 KB content each)':<52} {rate:10,.0f} spans/s  "
              f"({len(chats):,} spans, {msgs:,} messages rows)")
        print(f"{'calibration: bare SDK span, no-op exporter':<52} {bare_span_us(args.tool_calls):10.1f} us/span")
        print(f"{'tool_span overhead, no-op exporter':<52} {tool_overhead_us(_Nop(), args.tool_calls):10.1f} us/call")
        with Store(Path(tmp) / "overhead.duckdb") as store:
            us = tool_overhead_us(DuckDBSpanExporter(store), args.tool_calls)
        print(f"{'tool_span overhead, DuckDB exporter (end to end)':<52} {us:10.1f} us/call")


if __name__ == "__main__":
    main()
