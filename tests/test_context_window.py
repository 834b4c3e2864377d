"""The loop keeps every request inside the model's own context window, counted by the model
(models.base.CountsTokens), and a conversation that cannot fit ends as the agent's failure
(context_limit), never as a model error. Pure: no sandbox is touched (the scripts call a tool the
harness does not have, which the loop answers itself)."""

from __future__ import annotations

import time

import pytest

from metaopt.core.errors import ModelError
from metaopt.task_agent.harness_io import harness_from_data
from metaopt.task_agent.loop import DROPPED, TaskAgent, _tokens, request_limit
from metaopt.task_agent.messages import Message, ModelResponse, ModelSettings, ToolResultPart, ToolSpec
from metaopt.task_agent.models.base import CONTEXT_OVERFLOW, CountsTokens
from metaopt.task_agent.models.fake import ScriptModel

LOOK = {"tool": "look", "arguments": {}}  # not a harness tool: answered "Unknown tool" by the loop


class WindowedModel(ScriptModel):
    """A scripted model with a small window and a tokenizer of its own: 500 tokens per tool result
    still in the history, one per two characters of any other text (characters / 4 says far less).
    Records the size of every request it got; `fail_with` makes generate() raise instead."""

    def __init__(self, steps: list[dict], window: int, fail_with: Exception | None = None):
        super().__init__(steps)
        self.context_window, self.fail_with, self.sizes = window, fail_with, []

    def count_tokens(self, messages: list[Message], tools: list[ToolSpec]) -> int:
        results = [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
        return sum(500 for p in results if p.response != DROPPED) + sum(len(m.text) // 2 for m in messages)

    def generate(self, messages: list[Message], tools: list[ToolSpec], settings: ModelSettings) -> ModelResponse:
        self.sizes.append(self.count_tokens(messages, tools))
        if self.fail_with is not None:
            raise self.fail_with
        return super().generate(messages, tools, settings)


def harness(reply_tokens: int, **context) -> object:
    return harness_from_data({"schema_version": 1, "name": "t", "prompts": {"system": "Be brief."},
                              "routing": {"context": context}, "model": {"max_tokens": reply_tokens}})


def run(h, model, instruction: str = "task"):
    return TaskAgent(h, model, None).run(instruction, time.monotonic() + 30)  # type: ignore[arg-type]


def tool_responses(ep) -> list[str]:
    return [p.response for m in ep.messages for p in m.parts if isinstance(p, ToolResultPart)]


def test_the_double_is_a_token_counting_model():
    assert isinstance(WindowedModel([], 100), CountsTokens)
    assert not isinstance(ScriptModel([]), CountsTokens)


@pytest.mark.parametrize("reply_tokens, limit", [(200, 1800), (8192, 1500)])  # room: max_tokens, at most 1/4
def test_the_history_is_trimmed_to_the_window_less_room_for_the_reply(reply_tokens, limit):
    model = WindowedModel([LOOK] * 4 + [{"text": "done"}], window=2000)
    ep = run(harness(reply_tokens), model)  # no harness budget: the window alone applies
    assert ep.outcome == "no_tool_call" and ep.error is None and model.unused_steps == []
    assert max(model.sizes) <= limit < max(model.sizes) + 500, model.sizes  # it filled up, then was trimmed
    responses = tool_responses(ep)
    assert responses[0] == DROPPED and DROPPED not in responses[-1], responses
    assert _tokens(ep.messages) < limit // 4  # characters / 4 alone would never have trimmed


def test_the_model_count_also_applies_to_a_harness_budget():
    model = WindowedModel([LOOK] * 3 + [{"text": "done"}], window=100_000)
    ep = run(harness(200, max_tokens=1200), model)
    assert max(model.sizes) <= 1200 and tool_responses(ep)[0] == DROPPED, model.sizes


def test_models_without_a_window_keep_characters_over_four():
    model = ScriptModel([LOOK] * 4 + [{"text": "done"}])
    ep = run(harness(200), model)  # no budget and no window: nothing is trimmed
    assert ep.outcome == "no_tool_call" and DROPPED not in tool_responses(ep)
    assert request_limit(None, None, 4096) is None and request_limit(1000, None, 4096) == 1000


def test_a_request_that_cannot_fit_ends_as_the_agents_failure():
    model = WindowedModel([{"text": "never asked"}], window=2000)
    ep = run(harness(200), model, instruction="x" * 5000)  # the task alone is 2500 tokens
    assert ep.outcome == "context_limit" and ep.error is None and model.sizes == [] and ep.turns == 0


def test_a_context_size_error_from_the_server_is_the_agents_failure_too():
    overflow = ModelError("HTTP 400 exceed_context_size_error: request (9182 tokens) exceeds the available "
                          "context size (8192 tokens)", provider="fake", error_type=CONTEXT_OVERFLOW, status_code=400)
    ep = run(harness(200), WindowedModel([], window=2000, fail_with=overflow))
    assert ep.outcome == "context_limit" and "exceeds the available context size" in (ep.error or "")
    other = ModelError("HTTP 500 server_error", provider="fake", error_type="server_error", status_code=500)
    ep = run(harness(200), WindowedModel([], window=2000, fail_with=other))
    assert ep.outcome == "model_error" and "server_error" in (ep.error or "")


def test_a_failing_count_is_a_model_error_not_a_crash():
    class Broken(ScriptModel):
        context_window = 2000

        def count_tokens(self, messages, tools):
            raise ModelError("could not count tokens", provider="fake", error_type="tokenize_error")

    ep = run(harness(200), Broken([{"text": "never asked"}]))
    assert ep.outcome == "model_error" and "could not count tokens" in (ep.error or "")
