"""Tool calls written in the reply text (task_agent/models/toolcall_text.py): the parser, and a
broken call coming over the real OpenAI client through the loop into the sandbox and the trace."""

from __future__ import annotations

import json
import time

import pytest
from wire_servers import WireServer, openai_completion, openai_tool_call

from metaopt.task_agent.harness_io import load_harness, resolve_harness
from metaopt.task_agent.loop import TaskAgent
from metaopt.task_agent.messages import Message, ModelResponse, TextPart, ToolCallPart, ToolSpec
from metaopt.task_agent.models import allow_model_requests, get_model
from metaopt.task_agent.models.toolcall_text import INVALID, TextToolCalls, recover, with_text_calls
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

BASH = ToolSpec(name="bash", description="run", parameters={"type": "object"})


def test_fenced_json_call_is_recovered_and_removed_from_the_text():
    r = recover('I will list the files.\n```json\n{"name": "bash", "arguments": {"command": "ls -la"}}\n```\n')
    assert [(c.name, c.arguments, c.arguments_error) for c in r.calls] == [("bash", {"command": "ls -la"}, None)]
    assert r.text == "I will list the files." and r.malformed == 0


def test_tool_call_tags_bare_json_lists_and_string_arguments():
    tagged = recover('<tool_call>\n{"name": "finish", "arguments": {"summary": "ok"}}\n</tool_call>')
    assert [(c.name, c.arguments) for c in tagged.calls] == [("finish", {"summary": "ok"})] and tagged.text == ""
    bare = recover('{"name": "bash", "parameters": {"command": "pwd"}}')
    assert [(c.name, c.arguments) for c in bare.calls] == [("bash", {"command": "pwd"})]
    listed = recover('```json\n[{"name": "bash", "arguments": {"command": "a"}},'
                     ' {"name": "bash", "arguments": "{\\"command\\": \\"b\\"}"}]\n```')
    assert [c.arguments["command"] for c in listed.calls] == ["a", "b"]
    assert len({c.id for c in listed.calls}) == 2
    fenced_in_tags = recover('<tool_call>```json\n{"name": "bash", "arguments": {"command": "x"}}\n```</tool_call>')
    assert [c.arguments for c in fenced_in_tags.calls] == [{"command": "x"}]
    unterminated = recover('```json\n{"name": "bash", "arguments": {"command": "ls"}}')
    assert [c.arguments for c in unterminated.calls] == [{"command": "ls"}]


def test_json_that_is_not_a_call_stays_text():
    text = 'The file should be:\n```json\n{"name": "myapp", "version": "1.0"}\n```\nand `{"a": 1}` inline.'
    r = recover(text)
    assert r.calls == [] and r.text == text
    assert recover("```bash\nls -la\n```").calls == []
    assert recover("plain words, no call").calls == []


def test_broken_calls_become_calls_with_an_error_never_an_exception():
    r = recover('```json\n{"name": "bash", "arguments": {"command": "ls"\n```')
    [call] = r.calls
    assert call.name == "bash" and call.arguments == {} and r.malformed == 1
    assert "not valid JSON" in call.arguments_error and '{"command": "ls"' in call.arguments_error
    [tagged] = recover("<tool_call>{name: bash}</tool_call>").calls
    assert tagged.name == INVALID and "not valid JSON" in tagged.arguments_error
    [not_object] = recover('```json\n{"name": "bash", "arguments": [1, 2]}\n```').calls
    assert "must be a JSON object" in not_object.arguments_error
    for junk in ("```json\n", "<tool_call>", "```json\n{\"name\": \"x\", \"arguments\": ", "{", "[]", "```\n```"):
        recover(junk)  # never raises


def test_with_text_calls_keeps_server_calls_and_notes_what_it_could_not_parse():
    def response(*parts):
        return ModelResponse(message=Message(role="assistant", parts=list(parts)), model="m", provider="p")

    ok = response(ToolCallPart(id="1", name="bash", arguments={"command": "ls"}))
    assert with_text_calls(ok, [BASH]) is ok
    bad = response(ToolCallPart(id="1", name="bash", arguments_error="invalid JSON in tool arguments: {"))
    assert with_text_calls(bad, [BASH]).unparsed_output == "invalid JSON in tool arguments: {"
    text = '```json\n{"name": "bash", "arguments": {"command": "ls"}}\n```'
    recovered = with_text_calls(response(TextPart(content=text)), [BASH])
    assert recovered.finish_reason == "tool_call" and recovered.unparsed_output == text
    assert [c.arguments for c in recovered.message.tool_calls] == [{"command": "ls"}]
    assert recovered.message.text == ""
    cut = response(TextPart(content='<tool_call>{"name": "bash", "arguments": {"command": "l'))
    cut = with_text_calls(cut.model_copy(update={"finish_reason": "length"}), [BASH])
    assert cut.finish_reason == "length" and cut.message.tool_calls[0].arguments_error  # a cut-off call says so
    no_tools = response(TextPart(content=text))
    assert with_text_calls(no_tools, []) is no_tools  # no tools offered: text is text


@pytest.mark.usefixtures("docker_image")
def test_a_call_written_as_text_over_the_real_client_reaches_the_sandbox_and_a_broken_one_the_model(
        tmp_path, make_sandbox):
    sb = make_sandbox()
    store = Store(tmp_path / "t.duckdb")
    tracing = Tracing.for_store(store)
    broken = '```json\n{"name": "bash", "arguments": {"command": "echo no"\n```'
    with WireServer() as server, allow_model_requests():
        server.reply("/v1/chat/completions", openai_completion(
            'Creating it.\n```json\n{"name": "bash", "arguments": {"command": "echo hi > /tmp/f && cat /tmp/f"}}\n```'))
        server.reply("/v1/chat/completions", openai_completion(broken))
        server.reply("/v1/chat/completions", openai_completion(None, finish_reason="tool_calls", tool_calls=[
            openai_tool_call("c3", "bash", '{"command": "ls')]))
        server.reply("/v1/chat/completions", openai_completion("done"))
        base = get_model("openai-compatible/m", base_url=server.openai_url)
        model, wrap = tracing.wrap(TextToolCalls(base))
        h = load_harness(resolve_harness("minimal"))
        with tracing.episode(agent_name=h.name, harness_version="v", conversation_id="c", run_id="r",
                             trial_id="r/t/0", task_id="t", provider=model.provider) as span:
            ep = TaskAgent(h, model, sb, wrap_call=wrap).run("x", time.monotonic() + 60)
            span.finish(ep.usage, ep.outcome, ep.error)
        bodies = server.bodies("/v1/chat/completions")
    results = [p for m in ep.messages if m.role == "tool" for p in m.parts]
    assert results[0].response.strip() == "hi" and not results[0].is_error
    assert results[1].is_error and "not valid JSON" in results[1].response
    assert results[2].is_error and "not a JSON object" in results[2].response
    assert ep.outcome == "no_tool_call" and ep.turns == 4
    # the model is told, over the wire, what was wrong with its call
    assert "not valid JSON" in [m for m in bodies[2]["messages"] if m["role"] == "tool"][-1]["content"]
    chats = store.rows("SELECT attributes FROM spans WHERE operation_name = 'chat' ORDER BY start_ns")
    unparsed = [json.loads(c["attributes"]).get("metaopt.response.unparsed_output") for c in chats]
    assert unparsed[0].startswith("Creating it.") and unparsed[1] == broken
    assert '{"command": "ls' in unparsed[2] and unparsed[3] is None
    tracing.shutdown()
    store.close()
