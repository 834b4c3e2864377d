"""The real 0.5B model's context window: tokens are counted by its server's own template and
tokenizer, and a conversation bigger than the window is trimmed by the loop instead of being
refused by the server. Deterministic: every reply asked for is one token, and nothing depends on
what the model says."""

from __future__ import annotations

import time

import pytest

from metaopt.core.errors import ModelError
from metaopt.task_agent.harness_io import harness_from_data
from metaopt.task_agent.loop import DROPPED, TaskAgent
from metaopt.task_agent.messages import Message, ModelSettings, ToolCallPart, ToolResultPart, ToolSpec
from metaopt.task_agent.models import allow_model_requests, get_model
from metaopt.task_agent.models.base import CONTEXT_OVERFLOW, CountsTokens

pytestmark = pytest.mark.timeout(300)
BASH = ToolSpec(name="bash", description="Run a command.",
                parameters={"type": "object", "properties": {"command": {"type": "string"}}})


def exchange(i: int, output: str) -> list[Message]:
    return [Message(role="assistant", parts=[ToolCallPart(id=f"c{i}", name="bash", arguments={"command": "cat log"})]),
            Message(role="tool", parts=[ToolResultPart(id=f"c{i}", response=output)])]


def test_tokens_are_counted_by_the_server_and_an_oversized_history_is_trimmed(local_model):
    model = get_model(local_model("qwen2.5-coder-0.5b"))
    assert isinstance(model, CountsTokens) and model.context_window == 8192  # the slot size /props reports
    one_token = ModelSettings(model=model.name, temperature=0, max_tokens=1)
    small = [Message.system("Be brief."), Message.user("List the files."), *exchange(1, "a.txt\nb.txt\n")]
    h = harness_from_data({"schema_version": 1, "name": "t", "model": {"max_tokens": 256}})
    agent = TaskAgent(h, model, None)  # type: ignore[arg-type]  # no tool runs: only the context is managed
    with allow_model_requests():
        counted = model.count_tokens(small, [BASH])
        assert counted == model.generate(small, [BASH], one_token).usage.input_tokens  # the server's own count
        assert counted > agent._tokens(small, []) > 0  # the tools' text is part of the request

        big = [*small[:2], *exchange(1, "word " * 9000), *exchange(2, "last output\n")]  # > 8192 tokens
        with pytest.raises(ModelError) as refused:  # as it stands, the server refuses it
            model.generate(big, [BASH], one_token)
        assert refused.value.error_type == CONTEXT_OVERFLOW

        t0 = time.monotonic()
        assert agent._fit_context(big, [BASH])  # no harness budget: the window alone applies
        assert model.count_tokens(big, [BASH]) <= 8192 - 256
        results = [p.response for m in big for p in m.parts if isinstance(p, ToolResultPart)]
        assert results == [DROPPED, "last output\n"], [r[:40] for r in results]
        assert model.generate(big, [BASH], one_token).usage.input_tokens == model.count_tokens(big, [BASH])
        assert time.monotonic() - t0 < 60


def test_a_task_bigger_than_the_window_ends_as_context_limit(local_model):
    model = get_model(local_model("qwen2.5-coder-0.5b"))
    h = harness_from_data({"schema_version": 1, "name": "t"})
    with allow_model_requests():
        ep = TaskAgent(h, model, None).run("word " * 9000, time.monotonic() + 120)  # type: ignore[arg-type]
    assert ep.outcome == "context_limit" and ep.turns == 0 and ep.error is None
