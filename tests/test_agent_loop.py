"""The task agent loop driven by the package's fake models and a local OpenAI-format server,
in a real Docker sandbox, traced into a real DuckDB store."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from wire_servers import WireServer, openai_completion, openai_tool_call

from metaopt.task_agent.harness_io import harness_from_data, load_harness, resolve_harness
from metaopt.task_agent.loop import DROPPED, TaskAgent
from metaopt.task_agent.models import allow_model_requests, get_model
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

pytestmark = pytest.mark.usefixtures("docker_image")


def script(tmp_path: Path, steps: list) -> str:
    p = tmp_path / f"script-{len(list(tmp_path.iterdir()))}.yaml"
    p.write_text(yaml.safe_dump(steps))
    return f"fake/script:{p}"


def harness(**routing) -> object:
    """The baseline harness with some routing sections replaced."""
    base = load_harness(resolve_harness("baseline")).model_dump(mode="json", exclude_unset=True)
    base["routing"] = {**base["routing"], **routing}
    return harness_from_data(base)


def test_tool_calls_run_in_the_sandbox_and_cd_persists(tmp_path, make_sandbox):
    sb = make_sandbox(workdir="/app")
    model = get_model(script(tmp_path, [
        {"tool": "bash", "arguments": {"command": "mkdir -p /app/sub && cd /app/sub && echo hi > f"}},
        {"tool": "bash", "arguments": {"command": "pwd; cat f"}},
        {"tool": "finish", "arguments": {"summary": "done"}},
        {"tool": "finish", "arguments": {"summary": "verified"}},
    ]))
    ep = TaskAgent(load_harness(resolve_harness("baseline")), model, sb, workdir="/app").run("x", time.monotonic() + 60)
    assert ep.outcome == "finished" and ep.summary == "verified" and ep.turns == 4
    outputs = [p.response for m in ep.messages if m.role == "tool" for p in m.parts]
    assert outputs[1].splitlines()[:2] == ["/app/sub", "hi"]
    assert "verif" in outputs[2].lower()  # the first finish is challenged once
    assert model.unused_steps == []


def test_errors_go_back_to_the_model(tmp_path, make_sandbox):
    sb = make_sandbox()
    model = get_model(script(tmp_path, [
        {"tool": "nosuch", "arguments": {}},
        {"tool": "bash", "arguments": {"cmd": "ls"}},
        {"tool": "bash", "arguments": {"command": "exit 3"}},
        {"text": "I give up"},
    ]))
    ep = TaskAgent(load_harness(resolve_harness("baseline")), model, sb).run("x", time.monotonic() + 60)
    results = [p for m in ep.messages if m.role == "tool" for p in m.parts]
    assert ep.outcome == "no_tool_call" and all(p.is_error for p in results)
    assert "Unknown tool 'nosuch'" in results[0].response
    assert "missing required argument 'command'" in results[1].response


def test_turn_limit_and_time_limit(tmp_path, make_sandbox):
    sb = make_sandbox()
    loop = [{"tool": "bash", "arguments": {"command": "true"}}] * 5
    ep = TaskAgent(harness(limits={"max_turns": 3}), get_model(script(tmp_path, loop)), sb).run("x", time.monotonic() + 60)
    assert (ep.outcome, ep.turns) == ("turn_limit", 3)
    slow = [{"tool": "bash", "arguments": {"command": "sleep 30"}}] * 3
    t0 = time.monotonic()
    ep = TaskAgent(harness(), get_model(script(tmp_path, slow)), sb).run("x", time.monotonic() + 2)
    assert ep.outcome == "time_limit" and time.monotonic() - t0 < 10


def test_context_overflow_drops_oldest_tool_outputs(tmp_path, make_sandbox):
    sb = make_sandbox()
    big = [{"tool": "bash", "arguments": {"command": "yes a | head -c 15000"}}] * 3
    h = harness(context={"max_tokens": 8000})
    ep = TaskAgent(h, get_model(script(tmp_path, big + [{"text": "ok"}])), sb).run("x", time.monotonic() + 60)
    responses = [p.response for m in ep.messages if m.role == "tool" for p in m.parts]
    assert DROPPED in responses[0] and len(responses[-1]) > 10000, [r[:80] for r in responses]


def test_context_overflow_can_be_summarized_by_the_model(tmp_path, make_sandbox):
    sb = make_sandbox()
    big = [{"tool": "bash", "arguments": {"command": "yes a | head -c 15000"}}] * 2  # the 2nd overflows
    steps = big + [{"text": "SUMMARY: printed a lot of a's"}, {"text": "done"}]
    model = get_model(script(tmp_path, steps))
    h = harness(context={"max_tokens": 8000, "on_overflow": "summarize"})
    ep = TaskAgent(h, model, sb).run("print things", time.monotonic() + 60)
    assert model.unused_steps == [] and ep.outcome == "no_tool_call"
    assert [m.role for m in ep.messages] == ["system", "user", "assistant"]
    assert "print things" in ep.messages[1].text and "SUMMARY: printed a lot" in ep.messages[1].text
    assert "Summarise your progress" in model.calls[2].messages[-1].text and model.calls[2].tools == []


def test_malformed_arguments_from_a_real_client_reach_the_model_and_the_trace(tmp_path, make_sandbox):
    sb = make_sandbox()
    store = Store(tmp_path / "t.duckdb")
    tracing = Tracing.for_store(store)
    with WireServer() as server, allow_model_requests():
        server.reply("/v1/chat/completions", openai_completion(None, finish_reason="tool_calls", tool_calls=[
            openai_tool_call("c1", "bash", '{"command": "ls')]))
        server.reply("/v1/chat/completions", openai_completion("sorry, stopping"))
        model, wrap = tracing.wrap(get_model("openai-compatible/local", base_url=server.openai_url))
        h = load_harness(resolve_harness("minimal"))
        with tracing.episode(agent_name=h.name, harness_version="v", conversation_id="c", run_id="r",
                             trial_id="r/t/0", task_id="t", provider=model.provider) as span:
            ep = TaskAgent(h, model, sb, wrap_call=wrap).run("x", time.monotonic() + 60)
            span.finish(ep.usage, ep.outcome, ep.error)
        second = server.bodies("/v1/chat/completions")[1]
    tool_msg = next(m for m in second["messages"] if m["role"] == "tool")
    assert "not a JSON object" in tool_msg["content"]
    rows = store.rows("SELECT span_id, operation_name, status_code FROM spans ORDER BY start_ns")
    assert [r["operation_name"] for r in rows] == ["invoke_agent", "chat", "execute_tool", "chat"]
    assert rows[2]["status_code"] == "ERROR"
    [result] = store.rows("SELECT text FROM messages WHERE span_id = ? AND direction = 'tool_result'",
                          [rows[2]["span_id"]])
    assert "not a JSON object" in result["text"]
    tracing.shutdown()
    store.close()


def test_a_model_call_stops_at_the_episode_deadline(make_sandbox):
    """The loop gives each call the time left; a call still running at the deadline ends the
    episode as time_limit (the agent ran out of time), not as a model error, and is not retried."""
    with WireServer() as server, allow_model_requests():
        server.reply("/v1/chat/completions", openai_completion("late"), delay_s=4)
        model = get_model("openai-compatible/slow", base_url=server.openai_url)
        t0 = time.monotonic()
        ep = TaskAgent(load_harness(resolve_harness("minimal")), model, make_sandbox()).run("x", t0 + 1.5)
        took = time.monotonic() - t0
        assert (ep.outcome, ep.error, ep.turns) == ("time_limit", None, 0)
        assert 1.4 < took < 3.5
        assert len(server.requests) == 1
