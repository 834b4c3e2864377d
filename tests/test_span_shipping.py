"""Spans collected where a trial runs (a Ray node) and ingested by the store's one writer must
become the same `spans` and `messages` rows as spans exported live."""

from __future__ import annotations

import json

import pytest
from test_traces import run_episode

from metaopt.traces.exporter import DuckDBSpanExporter
from metaopt.traces.instrument import agent_span, tool_span
from metaopt.traces.otel import OTLP_ENV, get_tracer, make_tracer_provider
from metaopt.traces.shipping import CollectingExporter, collecting_tracing, ingest, span_from_dict
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing


@pytest.fixture(autouse=True)
def no_otlp(monkeypatch):
    for k in OTLP_ENV:
        monkeypatch.delenv(k, raising=False)


def rows(store: Store) -> tuple[list, list]:
    spans = store.con.execute("SELECT * FROM spans ORDER BY span_id").fetchall()
    msgs = store.con.execute("SELECT * FROM messages ORDER BY span_id, direction, idx, part_idx").fetchall()
    return spans, msgs


def test_shipped_spans_become_the_same_rows_as_live_ones(tmp_path):
    live_store, shipped_store = Store(tmp_path / "live.duckdb"), Store(tmp_path / "shipped.duckdb")
    collector = CollectingExporter()
    # One provider, two exporters: every span reaches the live store and the collector alike.
    provider = make_tracer_provider(exporters=[DuckDBSpanExporter(live_store), collector])
    tracer = get_tracer(provider)
    run_episode(tracer, tmp_path, trial_id="r1/t/0")  # chat spans with reasoning, tool calls
    with agent_span(tracer, agent_name="a", harness_version=None, conversation_id="c", run_id="r1",
                    trial_id="r1/t/1", task_id="t", provider="fake") as ep:
        with tool_span(tracer, "bash", "c1", {"command": "sleep 99"}) as t:
            t.set_result("killed", is_error=True, extra={"timed_out": True, "exit_code": 124, "lines": [1, 2]})
        with pytest.raises(ValueError), tool_span(tracer, "python", "boom", {}):  # an ERROR span with an exception event
            raise ValueError("bad input")
        ep.finish({"input_tokens": 3, "output_tokens": 4}, "model_error", error="it broke", cost_usd=0.5)
    provider.force_flush()
    payload = json.loads(json.dumps(collector.take()))  # what crosses the machine boundary
    assert len(payload) == live_store.con.execute("SELECT count(*) FROM spans").fetchone()[0] >= 8
    assert collector.take() == []

    writer = Tracing.for_store(shipped_store)
    assert ingest(writer, payload) == len(payload)
    live, shipped = rows(live_store), rows(shipped_store)
    assert live[0] and live[1], "the episode produced spans and message rows"
    assert shipped == live
    writer.shutdown()
    provider.shutdown()


def test_collecting_tracing_traces_an_episode_without_a_store(tmp_path):
    tracing, collector = collecting_tracing()
    ep, _ = run_episode(tracing.tracer, tmp_path, trial_id="r2/t/0")
    spans = collector.take()
    assert {s["attributes"]["gen_ai.operation.name"] for s in spans} == {"invoke_agent", "chat", "execute_tool"}
    assert next(s for s in spans if s["parent"] is None)["context"]["span_id"] == ep.span_id
    store = Store(tmp_path / "s.duckdb")
    writer = Tracing.for_store(store)
    ingest(writer, spans)
    [trial] = store.con.execute("SELECT DISTINCT trial_id FROM spans").fetchall()
    assert trial == ("r2/t/0",) and store.con.execute("SELECT count(*) FROM messages").fetchone()[0] > 0
    writer.shutdown()


def test_a_span_from_another_format_version_is_refused():
    tracing, collector = collecting_tracing()
    with tool_span(tracing.tracer, "bash", "c1", {"command": "true"}):
        pass
    [span] = collector.take()
    with pytest.raises(ValueError, match="same metaopt version"):
        span_from_dict({**span, "v": 99})
