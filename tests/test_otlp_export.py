"""OTLP/HTTP export: with OTEL_EXPORTER_OTLP_ENDPOINT set, the same spans reach a collector.

The collector is a stdlib HTTP server on 127.0.0.1 that decodes protobuf
ExportTraceServiceRequests; nothing leaves the machine."""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from test_traces import run_episode

from metaopt.traces.exporter import DuckDBSpanExporter
from metaopt.traces.otel import get_tracer, make_tracer_provider
from metaopt.traces.store import Store


class Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []

    def spans(self) -> list[tuple[str, dict]]:
        """(name, attributes) of every span received; attribute values as Python scalars/lists."""
        out = []
        for req in self.requests:
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        out.append((span.name, {kv.key: _value(kv.value) for kv in span.attributes}))
        return out


def _value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind)


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        self.server.requests.append(req)
        self.server.paths.append(self.path)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def collector():
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
def test_spans_reach_the_otlp_collector(collector, tmp_path, monkeypatch, variable):
    base = f"http://127.0.0.1:{collector.server_address[1]}"
    for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "HTTP_PROXY",
              "http_proxy", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_COMPRESSION"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv(variable, base if variable == "OTEL_EXPORTER_OTLP_ENDPOINT" else f"{base}/v1/traces")
    with Store(tmp_path / "o.duckdb") as store:
        provider = make_tracer_provider(exporters=[DuckDBSpanExporter(store)])
        _ep, _ = run_episode(get_tracer(provider), tmp_path)
        assert provider.force_flush(10_000)
        provider.shutdown()
        stored = store.rows("SELECT name FROM spans ORDER BY name")

    assert set(collector.paths) == {"/v1/traces"}
    got = collector.spans()
    assert sorted(name for name, _ in got) == [r["name"] for r in stored]  # same spans both ways
    by_op: dict[str, list[dict]] = {}
    for _, attrs in got:
        by_op.setdefault(attrs["gen_ai.operation.name"], []).append(attrs)
    assert {k: len(v) for k, v in by_op.items()} == {"invoke_agent": 1, "chat": 3, "execute_tool": 3}
    [agent] = by_op["invoke_agent"]
    assert (agent["gen_ai.agent.name"], agent["metaopt.trial.id"], agent["gen_ai.provider.name"]) == ("baseline", "r1/t/0", "fake")
    assert sum("gen_ai.tool.definitions" in c for c in by_op["chat"]) == 1
    assert sorted(c["gen_ai.response.finish_reasons"][0] for c in by_op["chat"]) == ["stop", "tool_call", "tool_call"]
    outputs = [json.loads(c["gen_ai.output.messages"]) for c in by_op["chat"]]
    assert any(p["type"] == "reasoning" for o in outputs for p in o[0]["parts"])
    assert any("Fix the build" in c["gen_ai.input.messages"] for c in by_op["chat"])
    tools = sorted(json.loads(t["gen_ai.tool.call.arguments"])["command"] for t in by_op["execute_tool"])
    assert tools == ["cat notes.txt", "echo NEEDLE-42 > out.txt", "ls -la /app"]
    assert all(t["gen_ai.tool.call.result"].startswith("output of ") for t in by_op["execute_tool"])
    assert all(attrs.get("gen_ai.usage.input_tokens", 1) > 0 for attrs in by_op["chat"])
