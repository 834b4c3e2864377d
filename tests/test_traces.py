"""Traces end to end: TracedModel / tool_span / agent_span -> SDK provider -> DuckDB exporter ->
spans + messages rows -> queries. Driven by the shipped fake model, no mocks."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SpanExportResult

from metaopt.evaluation import TrialResult
from metaopt.task_agent.messages import Message, ModelSettings, ToolResultPart, ToolSpec, Usage
from metaopt.task_agent.models import get_model
from metaopt.traces import queries
from metaopt.traces.exporter import DuckDBSpanExporter
from metaopt.traces.instrument import TracedModel, agent_span, tool_span
from metaopt.traces.otel import OTLP_ENV, get_tracer, make_tracer_provider
from metaopt.traces.store import Store

SCRIPT = """
- reasoning: "I should list the files first"
  tool: bash
  arguments: {command: "ls -la /app"}
- text: "Two commands at once"
  tool_calls:
    - {tool: bash, arguments: {command: "cat notes.txt"}}
    - {tool: bash, arguments: {command: "echo NEEDLE-42 > out.txt"}}
- text: "All done."
"""
TOOLS = [ToolSpec(name="bash", description="Run a shell command")]


@pytest.fixture
def tracing(tmp_path, monkeypatch):
    for k in OTLP_ENV:
        monkeypatch.delenv(k, raising=False)
    store = Store(tmp_path / "t.duckdb")
    exporter = DuckDBSpanExporter(store)
    provider = make_tracer_provider(exporters=[exporter])
    yield store, exporter, get_tracer(provider), provider
    provider.shutdown()
    store.close()


def run_episode(tracer, tmp_path, trial_id="r1/t/0", script=SCRIPT, tool_output=None,
                user="Fix the build"):
    """A miniature agent loop: generate, run each tool call (fake output), append results."""
    path = tmp_path / f"script-{trial_id.replace('/', '_')}.yaml"
    path.write_text(script)
    model = TracedModel(get_model(f"fake/script:{path}"), tracer)
    messages = [Message.system("You are a careful engineer."), Message.user(user)]
    with agent_span(tracer, agent_name="baseline", harness_version="h1", conversation_id=trial_id,
                    run_id="r1", trial_id=trial_id, task_id="t", provider=model.provider) as ep:
        total = Usage()
        for _ in range(10):
            r = model.generate(messages, TOOLS, ModelSettings(model=model.name, temperature=0.0))
            total += r.usage
            messages.append(r.message)
            if not r.message.tool_calls:
                break
            results = []
            for call in r.message.tool_calls:
                out = tool_output or f"output of {call.arguments['command']}"
                with tool_span(tracer, call.name, call.id, call.arguments) as t:
                    t.set_result(out, extra={"exit_code": 0, "timed_out": False, "duration": 0.01})
                results.append(ToolResultPart(id=call.id, response=out))
            messages.append(Message(role="tool", parts=results))
        ep.finish(total, "finished")
    return ep, model


def test_span_tree_and_hot_columns(tracing, tmp_path):
    store, exporter, tracer, _ = tracing
    ep, model = run_episode(tracer, tmp_path)
    spans = store.rows("SELECT * FROM spans ORDER BY start_ns")
    ops = [s["operation_name"] for s in spans]
    assert ops.count("invoke_agent") == 1
    assert ops.count("chat") == len(model.calls) == 3
    assert ops.count("execute_tool") == 3
    [agent] = [s for s in spans if s["operation_name"] == "invoke_agent"]
    assert (agent["trace_id"], agent["span_id"], agent["parent_span_id"]) == (ep.trace_id, ep.span_id, None)
    assert agent["name"] == "invoke_agent baseline" and agent["kind"] == "INTERNAL"
    assert (agent["run_id"], agent["trial_id"], agent["task_id"], agent["harness_version"]) == ("r1", "r1/t/0", "t", "h1")
    assert agent["input_tokens"] == sum(c["input_tokens"] for c in spans if c["operation_name"] == "chat")
    for s in spans:
        assert s["trace_id"] == ep.trace_id and len(s["trace_id"]) == 32 and len(s["span_id"]) == 16
        assert s["trial_id"] == "r1/t/0" and s["service_name"] == "metaopt" and s["scope_name"] == "metaopt"
        assert s["end_ns"] > s["start_ns"] and s["duration_ms"] >= 0
        if s is not agent:
            assert s["parent_span_id"] == agent["span_id"]
    chats = [s for s in spans if s["operation_name"] == "chat"]
    assert all(c["kind"] == "CLIENT" and c["provider"] == "fake" and c["name"].startswith("chat script:")
               and c["response_model"] == model.name and c["input_tokens"] > 0 and c["output_tokens"] > 0
               and c["cost_usd"] == 0.0 for c in chats)
    assert [c["finish_reasons"] for c in chats] == [["tool_call"], ["tool_call"], ["stop"]]
    assert chats[0]["reasoning_tokens"] > 0
    tools = [s for s in spans if s["operation_name"] == "execute_tool"]
    assert [(t["tool_name"], t["tool_call_id"]) for t in tools] == [("bash", "call_1"), ("bash", "call_2"), ("bash", "call_3")]
    attrs = json.loads(tools[0]["attributes"])
    assert attrs["metaopt.tool.exit_code"] == 0 and attrs["gen_ai.tool.type"] == "function"
    assert "gen_ai.tool.call.result" not in attrs  # content lives in messages, once
    call = store.rows("SELECT direction, text, json FROM messages WHERE span_id = ? ORDER BY direction", [tools[0]["span_id"]])
    assert [(c["direction"], c["text"]) for c in call] == [("tool_call", '{"command": "ls -la /app"}'),
                                                          ("tool_result", "output of ls -la /app")]
    assert json.loads(call[0]["json"])["arguments"] == {"command": "ls -la /app"}
    assert exporter.dropped_attributes == exporter.dropped_events == exporter.failed == 0


def test_chat_spans_store_only_new_messages(tracing, tmp_path):
    store, _, tracer, _ = tracing
    run_episode(tracer, tmp_path)
    rows = store.rows("""SELECT span_id, attributes->>'$."metaopt.input.offset"' AS off,
                                attributes->>'$."gen_ai.tool.definitions"' AS defs
                         FROM spans WHERE operation_name = 'chat' ORDER BY start_ns""")
    assert [r["off"] for r in rows] == ["0", "2", "4"]
    assert json.loads(rows[0]["defs"])[0]["name"] == "bash" and not any(r["defs"] for r in rows[1:])
    per_span = store.rows("""SELECT span_id, count(DISTINCT idx) FILTER (direction = 'input') AS inputs,
                                    count(*) FILTER (direction = 'system') AS sys
                             FROM messages GROUP BY span_id""")
    counts = {r["span_id"]: (r["inputs"], r["sys"]) for r in per_span}
    assert [counts[r["span_id"]] for r in rows] == [(1, 1), (1, 0), (1, 0)]
    # positions in the conversation: user 0, assistant 1, tool 2, assistant 3, tool 4, assistant 5
    seq = store.rows("SELECT DISTINCT idx, role FROM messages WHERE direction IN ('input', 'output') ORDER BY idx")
    assert [(r["idx"], r["role"]) for r in seq] == [(0, "user"), (1, "assistant"), (2, "tool"),
                                                   (3, "assistant"), (4, "tool"), (5, "assistant")]


def test_messages_are_searchable_and_keep_reasoning(tracing, tmp_path):
    store, _, tracer, _ = tracing
    run_episode(tracer, tmp_path)
    hits = store.rows("SELECT direction, part_type, tool_call_id FROM messages WHERE text ILIKE '%needle-42%' ORDER BY direction")
    assert {(h["direction"], h["part_type"]) for h in hits} == {
        ("output", "tool_call"), ("tool_call", "tool_call"), ("tool_result", "tool_call_response"),
        ("input", "tool_call_response")}
    assert {h["tool_call_id"] for h in hits} == {"call_3"}
    [r] = store.rows("SELECT * FROM messages WHERE part_type = 'reasoning'")
    assert (r["direction"], r["role"], r["text"], r["trial_id"]) == ("output", "assistant", "I should list the files first", "r1/t/0")
    assert json.loads(r["json"]) == {"type": "reasoning", "content": "I should list the files first"}


def test_no_attribute_dropped_with_300_attributes_and_1mb_content(tracing, tmp_path):
    store, exporter, tracer, _ = tracing
    big = "x" * (1 << 20)
    run_episode(tracer, tmp_path, tool_output=big, user="start " + big)
    with tracer.start_as_current_span("many", attributes={f"k.{i}": i for i in range(300)}) as span:
        span.set_attribute("gen_ai.operation.name", "custom")
    assert exporter.dropped_attributes == exporter.dropped_events == 0
    [many] = store.rows("SELECT attributes FROM spans WHERE name = 'many'")
    assert len(json.loads(many["attributes"])) == 301
    lengths = store.rows("SELECT direction, max(length(text)) AS n FROM messages GROUP BY 1")
    assert {r["direction"]: r["n"] for r in lengths}["tool_result"] == 1 << 20
    assert {r["direction"]: r["n"] for r in lengths}["input"] >= 1 << 20


def test_redaction_switch(tracing, tmp_path, monkeypatch):
    store, _, tracer, _ = tracing
    monkeypatch.setenv("METAOPT_TRACE_CONTENT", "0")
    run_episode(tracer, tmp_path)
    dump = json.dumps(store.rows("SELECT * FROM spans"), default=str) + json.dumps(store.rows("SELECT * FROM messages"), default=str)
    for secret in ("ls -la", "NEEDLE", "careful engineer", "Fix the build", "list the files", "output of"):
        assert secret not in dump
    texts = {r["text"] for r in store.rows("SELECT DISTINCT text FROM messages")}
    assert texts == {"[redacted]"}
    roles = {(r["role"], r["part_type"]) for r in store.rows("SELECT DISTINCT role, part_type FROM messages")}
    assert ("assistant", "reasoning") in roles and ("assistant", "tool_call") in roles
    assert store.rows("SELECT count(*) AS n FROM spans WHERE tool_name = 'bash'")[0]["n"] == 3


class Exploding:
    name, provider = "fake/exploding", "fake"

    def __init__(self, message):
        self.message = message

    def generate(self, messages, tools, settings):
        raise RuntimeError(self.message)


def test_api_key_values_never_reach_the_store(tracing, tmp_path, monkeypatch):
    store, _, tracer, _ = tracing
    key = "sk-test-0123456789abcdefSECRET"
    monkeypatch.setenv("ACME_API_KEY", key)
    run_episode(tracer, tmp_path, tool_output=f"env: ACME_API_KEY={key}", user=f"use key {key}")
    model = TracedModel(Exploding(f"401 invalid key {key}"), tracer)
    with pytest.raises(RuntimeError), agent_span(tracer, agent_name="a", harness_version="h", conversation_id="c",
                                                 run_id="r1", trial_id="r1/t/1", task_id="t", provider="fake"):
        model.generate([Message.user(f"again {key}")], [], ModelSettings(model="fake/exploding"))
    with tracer.start_as_current_span("foreign", attributes={"note": f"leaked {key}"}):
        pass  # not our instrumentation: the exporter's backstop scrubs it
    dump = json.dumps(store.rows("SELECT * FROM spans"), default=str) + json.dumps(store.rows("SELECT * FROM messages"), default=str)
    assert "SECRET" not in dump and "[redacted]" in dump
    [chat] = store.rows("SELECT * FROM spans WHERE trial_id = 'r1/t/1' AND operation_name = 'chat'")
    assert (chat["status_code"], chat["error_type"]) == ("ERROR", "RuntimeError")
    assert "401 invalid key [redacted]" in chat["status_message"]
    [agent] = store.rows("SELECT * FROM spans WHERE trial_id = 'r1/t/1' AND operation_name = 'invoke_agent'")
    assert (agent["status_code"], agent["error_type"]) == ("ERROR", "RuntimeError")


def test_tool_errors_and_worker_threads(tracing, tmp_path):
    store, _, tracer, _ = tracing

    def work(ep, i):  # a worker thread: the parent is handed over explicitly
        with tool_span(tracer, "bash", f"c{i}", {"command": "sleep 99"}, context=ep.context) as t:
            t.set_result("killed", is_error=True, extra={"timed_out": True, "exit_code": 124})
        with ep.activate(), tool_span(tracer, "read", f"r{i}", {"path": "/x"}):
            pass

    with agent_span(tracer, agent_name="a", harness_version=None, conversation_id="c", run_id=None,
                    trial_id="t/9", task_id=None, provider="fake") as ep:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda i: work(ep, i), range(4)))
        with pytest.raises(ValueError), tool_span(tracer, "python", "boom", {}):
            raise ValueError("bad input")
    rows = store.rows("SELECT * FROM spans WHERE operation_name = 'execute_tool'")
    assert len(rows) == 9 and all(r["parent_span_id"] == ep.span_id and r["trial_id"] == "t/9" for r in rows)
    bash = [r for r in rows if r["tool_name"] == "bash"]
    assert all((r["status_code"], r["error_type"]) == ("ERROR", "timeout") for r in bash)
    assert json.loads(bash[0]["attributes"])["metaopt.tool.exit_code"] == 124
    [boom] = [r for r in rows if r["tool_call_id"] == "boom"]
    assert (boom["status_code"], boom["error_type"]) == ("ERROR", "ValueError")
    assert "bad input" in json.loads(boom["events"])[0]["attributes"]["exception.message"]


def test_show_trial_list_failures_sql(tracing, tmp_path):
    store, _, tracer, _ = tracing
    ep, _ = run_episode(tracer, tmp_path)
    base = {"run_id": "r1", "benchmark": "b", "task_id": "t", "agent": "baseline@fake"}
    store.insert(TrialResult(**{**base, "trial_id": "r1/t/0", "attempt": 0, "status": "failed",
                     "failure_mode": "tests_failed", "score": 0.0, "trace_id": ep.trace_id}))
    store.insert(TrialResult(**{**base, "trial_id": "r1/t/1", "attempt": 1, "status": "failed", "failure_mode": "tests_failed"}))
    store.insert(TrialResult(**{**base, "trial_id": "r1/t/2", "attempt": 2, "status": "timeout", "failure_mode": "agent_timeout"}))
    store.insert(TrialResult(**{**base, "trial_id": "r1/t/3", "attempt": 3, "status": "error"}))
    store.insert(TrialResult(**{**base, "trial_id": "r1/t/4", "attempt": 4, "status": "passed", "score": 1.0}))
    store.insert(TrialResult(**{**base, "run_id": "r2", "trial_id": "r2/t/0", "attempt": 0, "status": "failed",
                     "failure_mode": "tests_failed"}))

    shown = queries.show_trial(store, "r1/t/0")
    assert shown["trial"]["status"] == "failed" and shown["trace_ids"] == [ep.trace_id]
    assert shown["agent"]["outcome"] == "finished"
    steps = [(e["type"], e.get("direction") or e.get("name")) for e in shown["transcript"]]
    assert steps == [("system", None), ("message", "input"), ("message", "output"), ("tool", "bash"),
                     ("message", "input"), ("message", "output"), ("tool", "bash"), ("tool", "bash"),
                     ("message", "input"), ("message", "output")]
    t = shown["transcript"]
    assert t[0]["parts"][0]["content"] == "You are a careful engineer."
    assert t[1]["parts"][0]["content"] == "Fix the build"
    assert [p["type"] for p in t[2]["parts"]] == ["reasoning", "tool_call"]
    assert t[3]["arguments"] == {"command": "ls -la /app"} and t[3]["result"] == "output of ls -la /app"
    assert t[3]["extra"]["exit_code"] == 0
    assert t[-1]["parts"][0]["content"] == "All done." and t[-1]["finish_reasons"] == ["stop"]

    with pytest.raises(KeyError, match="no trial 'nope'"):
        queries.show_trial(store, "nope")
    assert queries.show_trial(store, "r1/t/4")["transcript"] == []

    groups = queries.failures(store, run_id="r1")
    assert [(g["failure_mode"], g["count"]) for g in groups] == [("tests_failed", 2), ("agent_timeout", 1), ("error", 1)]
    assert groups[0]["trial_ids"] == ["r1/t/0", "r1/t/1"]
    assert queries.failures(store)[0]["count"] == 3

    assert len(queries.list_trials(store)) == 6
    assert [r["trial_id"] for r in queries.list_trials(store, run_id="r1", status="failed")] == ["r1/t/0", "r1/t/1"]
    assert len(queries.list_trials(store, limit=2)) == 2
    cols, rows = queries.sql(store, "SELECT operation_name, count(*) AS n FROM spans GROUP BY 1 ORDER BY 1")
    assert cols == ["operation_name", "n"] and rows == [("chat", 3), ("execute_tool", 3), ("invoke_agent", 1)]


def test_exporter_buffering_and_failures(tmp_path, caplog):
    store = Store(tmp_path / "b.duckdb")
    through = DuckDBSpanExporter(store, batch_rows=1)
    buffered = DuckDBSpanExporter(store, batch_rows=100, max_delay_s=3600)
    tracer_t = get_tracer(make_tracer_provider(exporters=[through]))
    provider_b = make_tracer_provider(exporters=[buffered])
    tracer_b = get_tracer(provider_b)
    root = tracer_t.start_span("root")
    with tracer_t.start_as_current_span("child", context=trace.set_span_in_context(root)) as c:
        c.set_attribute("gen_ai.operation.name", "chat")
    assert store.rows("SELECT name FROM spans") == [{"name": "child"}]  # write-through: visible at once
    with agent_span(tracer_b, agent_name="a", harness_version="h", conversation_id="c", run_id="r",
                    trial_id="tb", task_id="t", provider="fake"):
        with tool_span(tracer_b, "bash", "1", {}) as t:
            t.set_result("ok")
        assert store.rows("SELECT count(*) AS n FROM spans WHERE trial_id = 'tb'")[0]["n"] == 0  # buffered
    assert store.rows("SELECT count(*) AS n FROM spans WHERE trial_id = 'tb'")[0]["n"] == 2  # episode end flushes
    with tracer_b.start_as_current_span("q", context=trace.set_span_in_context(root)):
        pass
    assert store.rows("SELECT count(*) AS n FROM spans WHERE name = 'q'")[0]["n"] == 0
    assert provider_b.force_flush()  # reaches the exporter through the provider
    assert store.rows("SELECT count(*) AS n FROM spans WHERE name = 'q'")[0]["n"] == 1
    root.end()
    store.close()
    with tracer_b.start_as_current_span("after-close"):  # the write fails; nothing raises
        pass
    assert buffered.failed == 1 and "span store write failed" in caplog.text
    assert buffered.export([]) == SpanExportResult.SUCCESS
    provider_b.shutdown()
    assert buffered.export([]) == SpanExportResult.FAILURE


def test_foreign_spans_are_stored_not_rejected(tracing):
    store, exporter, tracer, _ = tracing
    with tracer.start_as_current_span("other", attributes={
            "score": float("nan"), "gen_ai.input.messages": "not json", "gen_ai.output.messages": '[{"role": 1, "parts": [7]}]',
            "gen_ai.tool.call.arguments": "[redacted]", "gen_ai.tool.call.id": 42}):
        pass
    [row] = store.rows("SELECT attributes, tool_call_id FROM spans")
    assert json.loads(row["attributes"])["score"] == "nan" and row["tool_call_id"] == "42"
    got = store.rows("SELECT direction, role, part_type, text FROM messages ORDER BY direction")
    assert [(g["direction"], g["part_type"], g["text"]) for g in got] == [
        ("input", "raw", "not json"), ("output", "raw", "7"), ("tool_call", "tool_call", "[redacted]")]
    assert exporter.failed == 0


def test_provider_is_private_and_otlp_off_without_env(tmp_path, monkeypatch):
    for k in OTLP_ENV:
        monkeypatch.delenv(k, raising=False)
    with Store(tmp_path / "p.duckdb") as store:
        provider = make_tracer_provider(exporters=[DuckDBSpanExporter(store)], service_name="svc")
        assert trace.get_tracer_provider() is not provider
        assert len(provider._active_span_processor._span_processors) == 1
        assert provider.resource.attributes["service.name"] == "svc"
        assert provider._span_limits.max_span_attributes == 1024 and provider._span_limits.max_span_attribute_length is None
        provider.shutdown()


def test_tool_span_overhead_is_under_a_millisecond(tracing):
    _, exporter, tracer, _ = tracing
    n = 2000
    with agent_span(tracer, agent_name="a", harness_version="h", conversation_id="c", run_id="r",
                    trial_id="perf", task_id="t", provider="fake"):
        t0 = time.perf_counter()
        for i in range(n):
            with tool_span(tracer, "bash", f"c{i}", {"command": "ls"}) as t:
                t.set_result("a.txt\nb.txt", extra={"exit_code": 0})
        per_call = (time.perf_counter() - t0) / n
    assert per_call < 1e-3, f"{per_call * 1e6:.0f} us per tool call"
    assert exporter.failed == 0 and threading.active_count() >= 1
