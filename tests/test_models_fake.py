"""The fake models shipped in the package, and the message types' OTel shapes."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from metaopt.task_agent.messages import (
    Message,
    ModelResponse,
    ModelSettings,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from metaopt.task_agent.models import Model, ModelConfigError, get_model
from metaopt.task_agent.models.fake import EXHAUSTED, ScriptModel

S = ModelSettings(model="fake/x")
BASH = ToolSpec(name="bash", description="Run a command.",
                parameters={"type": "object", "properties": {"command": {"type": "string"}}})
FINISH = ToolSpec(name="finish", description="Stop.")
HISTORY = [Message.system("You are an agent."), Message.user("Do the task.")]


def test_nop_does_nothing_and_records_calls():
    model = get_model("fake/nop")
    assert isinstance(model, Model)
    response = model.generate(HISTORY, [BASH], S)
    assert response.message == Message(role="assistant", parts=[TextPart(content="I will do nothing.")])
    assert (response.finish_reason, response.cost_usd, response.provider) == ("stop", 0.0, "fake")
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert len(model.calls) == 1 and model.calls[0].messages == HISTORY and model.calls[0].tools == [BASH]


def test_script_from_yaml_consumes_steps_then_exhausts(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(
        "- {reasoning: 'look first', tool: bash, arguments: {command: ls}}\n"
        "- tool_calls:\n"
        "    - {tool: bash, arguments: {command: pwd}, id: my-id}\n"
        "    - {name: finish}\n"
        "- text: all done\n"
        "- text: never reached\n")
    model = get_model(f"fake/script:{path}")
    r1, r2, r3 = (model.generate(HISTORY, [BASH], S) for _ in range(3))
    assert r1.message.parts == [ReasoningPart(content="look first"),
                                ToolCallPart(id="call_1", name="bash", arguments={"command": "ls"})]
    assert r1.finish_reason == "tool_call" and r1.usage.reasoning_tokens == len("look first") // 4
    assert [(c.id, c.name, c.arguments) for c in r2.message.tool_calls] == [
        ("my-id", "bash", {"command": "pwd"}), ("call_3", "finish", {})]  # n-th call overall
    assert r3.message.text == "all done" and r3.finish_reason == "stop"
    assert model.unused_steps == [{"text": "never reached"}]
    model.generate(HISTORY, [], S)
    r5 = model.generate(HISTORY, [], S)
    assert r5.message.text == EXHAUSTED and r5.finish_reason == "stop"
    assert model.unused_steps == [] and model.overrun == 1 and len(model.calls) == 5


def test_script_from_json(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"tool": "bash", "arguments": {"command": "echo hi"}}]))
    model = get_model(f"fake/script:{path}")
    assert model.generate(HISTORY, [BASH], S).message.tool_calls[0].arguments == {"command": "echo hi"}


@pytest.mark.parametrize("steps,match", [
    ([{"txt": "typo"}], r"step 0: unknown keys \['txt'\]"),
    (["just a string"], "step 0: must be a mapping"),
    ([{"text": "ok"}, {"arguments": {}}], "step 1: needs text, reasoning, tool or tool_calls"),
    ([{"tool_calls": [{"arguments": {}}]}], "step 0: each tool_calls entry needs tool"),
])
def test_script_rejects_bad_steps(steps, match):
    with pytest.raises(ModelConfigError, match=match):
        ScriptModel(steps)


def test_script_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ModelConfigError, match="cannot read fake script"):
        get_model(f"fake/script:{tmp_path / 'nope.yaml'}")


@pytest.mark.parametrize("tools,last", [([BASH, FINISH], "finish"), ([BASH], None)])
def test_solution_replays_commands_then_finishes(tools, last):
    model = get_model("fake/solution", context={"solution_commands": ["cd /app", "make"], "tool": "bash"})
    responses = [model.generate(HISTORY, tools, S) for _ in range(4)]
    assert [r.message.tool_calls[0].arguments for r in responses[:2]] == [{"command": "cd /app"}, {"command": "make"}]
    assert all(r.message.tool_calls[0].name == "bash" for r in responses[:2])
    if last == "finish":
        assert responses[2].message.tool_calls[0].name == "finish"
        assert responses[2].finish_reason == "tool_call"
    else:
        assert responses[2].message.text == "Done." and responses[2].finish_reason == "stop"
    assert responses[3].message.tool_calls == [] and responses[3].finish_reason == "stop"
    assert all(r.cost_usd == 0.0 for r in responses)


def test_solution_needs_commands():
    with pytest.raises(ModelConfigError, match="solution_commands"):
        get_model("fake/solution")


def test_unknown_fake_lists_the_fakes():
    with pytest.raises(ModelConfigError, match="fake/nop, fake/script:PATH, fake/solution"):
        get_model("fake/oracle")


def test_messages_dump_as_otel_genai_parts():
    message = Message(role="assistant", parts=[
        ReasoningPart(content="hmm", signature="sig"),
        ReasoningPart(content="", redacted=True, data="opaque"),
        TextPart(content="hi"),
        ToolCallPart(id="c1", name="bash", arguments={"command": "ls"}),
        ToolCallPart(id="c2", name="bash", arguments_error="invalid JSON: {"),
    ])
    assert message.to_otel(finish_reason="tool_call") == {"role": "assistant", "finish_reason": "tool_call", "parts": [
        {"type": "reasoning", "content": "hmm", "signature": "sig"},
        {"type": "reasoning", "content": "", "redacted": True, "data": "opaque"},
        {"type": "text", "content": "hi"},
        {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": "ls"}},
        {"type": "tool_call", "id": "c2", "name": "bash", "arguments": {}, "arguments_error": "invalid JSON: {"},
    ]}
    result = Message(role="tool", parts=[ToolResultPart(id="c1", response="a.txt"),
                                         ToolResultPart(id="c2", response="bad", is_error=True)])
    assert result.to_otel()["parts"] == [
        {"type": "tool_call_response", "id": "c1", "response": "a.txt"},
        {"type": "tool_call_response", "id": "c2", "response": "bad", "is_error": True}]
    for m in (message, result):
        assert Message.from_otel(json.loads(json.dumps(m.to_otel("stop")))) == m
    assert BASH.to_otel()["name"] == "bash"


def test_messages_are_frozen_and_strict():
    with pytest.raises(ValidationError):
        TextPart(content="x").content = "y"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Message(role="robot", parts=[])  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ModelSettings(model="m", reasoning_effort="extreme")  # type: ignore[arg-type]


def test_usage_adds_and_response_defaults():
    total = Usage(input_tokens=1, output_tokens=2, reasoning_tokens=1) + Usage(input_tokens=3, cache_read_tokens=2)
    assert total == Usage(input_tokens=4, output_tokens=2, cache_read_tokens=2, reasoning_tokens=1)
    response = ModelResponse(message=Message(role="assistant", parts=[]), model="m", provider="fake")
    assert response.cost_usd is None and response.finish_reason == "stop"
