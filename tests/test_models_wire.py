"""Model clients against local stand-ins of the Anthropic and OpenAI HTTP APIs.

The real SDKs send real HTTP to 127.0.0.1; assertions are on what arrived (bodies, headers).
Requests are allowed only inside the `allowed` fixture; the key is a fake from the environment.
"""

from __future__ import annotations

import logging

import pytest
from wire_servers import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    WireServer,
    anthropic_error,
    anthropic_message,
    openai_completion,
    openai_error,
    openai_tool_call,
    text,
    thinking,
    tool_use,
)

from metaopt.task_agent.messages import (
    Message,
    ModelSettings,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from metaopt.task_agent.models import (
    MissingApiKey,
    ModelConfigError,
    ModelError,
    ModelRequestsBlocked,
    UnknownProvider,
    allow_model_requests,
    base,
    get_model,
)
from metaopt.task_agent.models.pricing import cost_usd, price_for
from metaopt.task_agent.models.retry import Failure, RetryPolicy, parse_retry_after

ANT_KEY = "test-key-not-real-anthropic"
OAI_KEY = "test-key-not-real-openai"
BASH = ToolSpec(name="bash", description="Run a shell command.",
                parameters={"type": "object", "properties": {"command": {"type": "string"}},
                            "required": ["command"]})
FINISH = ToolSpec(name="finish", description="Stop.", parameters={"type": "object"})

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def env(monkeypatch):
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
                "OPENAI_API_KEY", "OPENAI_BASE_URL", "METAOPT_PRICES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANT_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OAI_KEY)


@pytest.fixture
def server():
    with WireServer() as s:
        yield s


@pytest.fixture
def allowed():
    with allow_model_requests():
        yield


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def retry(sleeps):
    return RetryPolicy(max_attempts=3, sleep=sleeps.append)


def settings(model: str, **kw) -> ModelSettings:
    return ModelSettings(model=model, **kw)


def key_sent(headers: dict[str, str], key: str) -> bool:
    # SDK majors differ: x-api-key (anthropic < 2) or a bearer token (anthropic 2.x, openai).
    return headers.get("x-api-key") == key or headers.get("authorization") == f"Bearer {key}"


# --- Anthropic ---------------------------------------------------------------------------

def test_anthropic_tool_round_trip_keeps_thinking_and_caches(server, allowed):
    server.reply(ANTHROPIC_PATH, anthropic_message(
        [thinking("Let me list files.", "sig-abc"), text("Listing."),
         tool_use("toolu_1", "bash", {"command": "ls"})],
        stop_reason="tool_use", input_tokens=20, output_tokens=30, cache_read=1000, cache_write=80))
    server.reply(ANTHROPIC_PATH, anthropic_message([text("Done.")], id="msg_02"))
    model = get_model("anthropic/claude-haiku-4-5", base_url=server.url)
    s = settings("anthropic/claude-haiku-4-5", thinking_budget=2048, temperature=0.5, max_tokens=1000)
    history = [Message.system("You are terse."), Message.user("List files.")]

    first = model.generate(history, [BASH, FINISH], s)

    assert first.finish_reason == "tool_call"
    assert first.message.parts == [
        ReasoningPart(content="Let me list files.", signature="sig-abc"), TextPart(content="Listing."),
        ToolCallPart(id="toolu_1", name="bash", arguments={"command": "ls"})]
    assert first.usage == Usage(input_tokens=1100, output_tokens=30, cache_read_tokens=1000,
                                cache_write_tokens=80)
    assert first.cost_usd == pytest.approx((20 * 3 + 1000 * 0.3 + 80 * 3.75 + 30 * 15) / 1e6)
    assert (first.provider, first.model, first.response_id) == ("anthropic", "claude-sonnet-4-5-20250929", "msg_01")
    assert (first.server_address, first.server_port) == ("127.0.0.1", int(server.url.rsplit(":", 1)[1]))

    history += [first.message, Message(role="tool", parts=[ToolResultPart(id="toolu_1", response="a.txt")])]
    second = model.generate(history, [BASH, FINISH], s)
    assert second.message.text == "Done." and second.finish_reason == "stop"

    body = server.bodies(ANTHROPIC_PATH)[1]
    assert body["model"] == "claude-haiku-4-5"
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1] == {"name": "finish", "description": "Stop.", "input_schema": {"type": "object"},
                                 "cache_control": {"type": "ephemeral"}}
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in body  # the API rejects temperature with thinking on
    assert body["max_tokens"] > 2048
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "List files."}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Let me list files.", "signature": "sig-abc"},
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]},
    ]
    headers = server.requests[0].headers
    assert key_sent(headers, ANT_KEY) and "anthropic-version" in headers


def test_anthropic_merges_tool_results_and_replays_redacted_thinking(server, allowed):
    server.reply(ANTHROPIC_PATH, anthropic_message([text("ok")]))
    model = get_model("anthropic/claude-haiku-4-5", base_url=server.url)
    assistant = Message(role="assistant", parts=[
        ReasoningPart(content="", redacted=True, data="ENCRYPTED=="),
        ToolCallPart(id="t1", name="bash", arguments={"command": "a"}),
        ToolCallPart(id="t2", name="bash", arguments={"command": "b"})])
    history = [Message.user("go"), assistant,
               Message(role="tool", parts=[ToolResultPart(id="t1", response="A")]),
               Message(role="tool", parts=[ToolResultPart(id="t2", response="boom", is_error=True)]),
               Message.user("and now?")]
    model.generate(history, [BASH], settings("anthropic/claude-haiku-4-5", reasoning_effort="low"))

    messages = server.bodies(ANTHROPIC_PATH)[0]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][0] == {"type": "redacted_thinking", "data": "ENCRYPTED=="}
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": True},
        {"type": "text", "text": "and now?"}]


def test_anthropic_without_thinking_sends_temperature(server, allowed):
    server.reply(ANTHROPIC_PATH, anthropic_message([text("hi")], stop_reason="max_tokens",
                                                   model="some-unpriced-model"))
    model = get_model("anthropic/claude-haiku-4-5", base_url=server.url)
    response = model.generate([Message.user("hi")], [], settings("x", temperature=0.2, max_tokens=77))
    body = server.bodies(ANTHROPIC_PATH)[0]
    assert body["temperature"] == 0.2 and body["max_tokens"] == 77
    assert "thinking" not in body and "tools" not in body and "system" not in body
    assert response.finish_reason == "length"
    assert response.cost_usd is None  # unknown price is None, never 0


def test_anthropic_rate_limit_honours_retry_after(server, allowed, sleeps, retry):
    server.reply(ANTHROPIC_PATH, anthropic_error("rate_limit_error", "slow down"), status=429,
                 headers={"retry-after": "7"})
    server.reply(ANTHROPIC_PATH, anthropic_message([text("ok")]))
    model = get_model("anthropic/claude-haiku-4-5", base_url=server.url, context={"retry": retry})
    assert model.generate([Message.user("hi")], [], settings("m")).message.text == "ok"
    assert sleeps == [7.0] and len(server.requests) == 2


def test_anthropic_overloaded_retried_then_gives_up(server, allowed, sleeps, retry):
    for _ in range(3):
        server.reply(ANTHROPIC_PATH, anthropic_error("overloaded_error", "Overloaded"), status=529)
    model = get_model("anthropic/claude-haiku-4-5", base_url=server.url, context={"retry": retry})
    with pytest.raises(ModelError) as info:
        model.generate([Message.user("hi")], [], settings("m"))
    err = info.value
    assert (err.error_type, err.status_code, err.attempts) == ("overloaded_error", 529, 3)
    assert len(sleeps) == 2 and len(server.requests) == 3
    assert 0.5 <= sleeps[0] <= 1.0 and 1.0 <= sleeps[1] <= 2.0  # backoff doubles, with jitter


def test_anthropic_overloaded_then_success(server, allowed, sleeps, retry):
    server.reply(ANTHROPIC_PATH, anthropic_error("overloaded_error", "Overloaded"), status=529)
    server.reply(ANTHROPIC_PATH, anthropic_message([text("ok")]))
    model = get_model("anthropic/claude-haiku-4-5", base_url=server.url, context={"retry": retry})
    assert model.generate([Message.user("hi")], [], settings("m")).message.text == "ok"
    assert len(sleeps) == 1


@pytest.mark.parametrize("status,kind", [(400, "invalid_request_error"), (401, "authentication_error"),
                                         (404, "not_found_error")])
def test_anthropic_client_errors_not_retried_and_keep_key_out(server, allowed, sleeps, retry,
                                                              caplog, status, kind):
    server.reply(ANTHROPIC_PATH, anthropic_error(kind, "bad thing\nsecond line"), status=status)
    model = get_model("anthropic/claude-haiku-4-5", base_url=server.url, context={"retry": retry})
    with caplog.at_level(logging.DEBUG), pytest.raises(ModelError) as info:
        model.generate([Message.user("hi")], [], settings("m"))
    err = info.value
    assert (err.error_type, err.status_code, err.attempts) == (kind, status, 1)
    assert sleeps == [] and len(server.requests) == 1
    assert "\n" not in str(err) and "bad thing" in str(err)
    assert err.__cause__ is None and err.__context__ is None  # the SDK error holds the request
    for shown in (str(err), repr(err), repr(model), caplog.text):
        assert ANT_KEY not in shown
    assert key_sent(server.requests[0].headers, ANT_KEY)


def test_connection_errors_are_retried(sleeps):
    with WireServer() as gone:
        url = gone.url  # a port that nobody listens on once the server stops
    model = get_model("anthropic/claude-haiku-4-5", base_url=url,
                      context={"retry": RetryPolicy(max_attempts=2, sleep=sleeps.append)})
    with allow_model_requests(), pytest.raises(ModelError) as info:
        model.generate([Message.user("hi")], [], settings("m"))
    assert info.value.error_type == "connection_error" and info.value.attempts == 2
    assert len(sleeps) == 1


# --- OpenAI ------------------------------------------------------------------------------

def test_openai_tool_round_trip(server, allowed):
    server.reply(OPENAI_PATH, openai_completion(
        "Running ls.", tool_calls=[openai_tool_call("call_1", "bash", '{"command": "ls"}')],
        finish_reason="tool_calls", prompt_tokens=1200, completion_tokens=300,
        cached_tokens=1000, reasoning_tokens=200))
    server.reply(OPENAI_PATH, openai_completion("All done.", id="chatcmpl-02"))
    model = get_model("openai/gpt-5-mini", base_url=server.openai_url)
    s = settings("openai/gpt-5-mini", reasoning_effort="high", max_tokens=900)
    history = [Message.system("Be brief."), Message.user("List files.")]

    first = model.generate(history, [BASH], s)
    assert first.finish_reason == "tool_call" and first.provider == "openai"
    assert first.message.parts == [TextPart(content="Running ls."),
                                   ToolCallPart(id="call_1", name="bash", arguments={"command": "ls"})]
    assert first.usage == Usage(input_tokens=1200, output_tokens=300, cache_read_tokens=1000,
                                reasoning_tokens=200)
    assert first.cost_usd == pytest.approx((200 * 0.25 + 1000 * 0.025 + 300 * 2.0) / 1e6)

    history += [first.message, Message(role="tool", parts=[ToolResultPart(id="call_1", response="a.txt")])]
    assert model.generate(history, [BASH], s).message.text == "All done."

    body = server.bodies(OPENAI_PATH)[1]
    assert body["model"] == "gpt-5-mini"
    assert body["max_completion_tokens"] == 900 and "max_tokens" not in body
    assert body["reasoning_effort"] == "high" and "temperature" not in body
    assert body["tools"] == [{"type": "function", "function": {
        "name": "bash", "description": BASH.description, "parameters": BASH.parameters}}]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "List files."},
        {"role": "assistant", "content": "Running ls.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
    ]
    assert key_sent(server.requests[0].headers, OAI_KEY)


def test_openai_malformed_arguments_never_raise(server, allowed):
    server.reply(OPENAI_PATH, openai_completion(None, finish_reason="tool_calls", tool_calls=[
        openai_tool_call("c1", "bash", '{"command": "ls'),
        openai_tool_call("c2", "bash", '["not", "an", "object"]'),
        openai_tool_call("c3", "finish", "")]))
    model = get_model("openai/gpt-4.1", base_url=server.openai_url)
    calls = model.generate([Message.user("x")], [BASH], settings("m")).message.tool_calls
    assert [c.arguments for c in calls] == [{}, {}, {}]
    assert "invalid JSON" in calls[0].arguments_error and '{"command": "ls' in calls[0].arguments_error
    assert "must be a JSON object" in calls[1].arguments_error
    assert calls[2].arguments_error is None


def test_openai_429_then_success_and_500s_exhaust(server, allowed, sleeps, retry):
    server.reply(OPENAI_PATH, openai_error("requests", "Rate limit reached", "rate_limit_exceeded"),
                 status=429, headers={"retry-after-ms": "1500"})
    server.reply(OPENAI_PATH, openai_completion("ok"))
    for _ in range(3):
        server.reply(OPENAI_PATH, openai_error("server_error", "oops"), status=500)
    model = get_model("openai/gpt-4.1", base_url=server.openai_url, context={"retry": retry})
    assert model.generate([Message.user("x")], [], settings("m")).message.text == "ok"
    assert sleeps == [1.5]
    with pytest.raises(ModelError) as info:
        model.generate([Message.user("x")], [], settings("m"))
    assert (info.value.status_code, info.value.error_type, info.value.attempts) == (500, "server_error", 3)
    assert OAI_KEY not in str(info.value)


def test_openai_compatible_via_env_base_url(server, allowed, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
    server.reply(OPENAI_PATH, openai_completion(
        "42", model="Qwen/Qwen3-8B", finish_reason="stop", reasoning_content="think think",
        tool_calls=[openai_tool_call("c1", "bash", '{"command": "pwd"}')]))
    model = get_model("openai-compatible/Qwen/Qwen3-8B")
    response = model.generate([Message.user("x")], [BASH], settings("m", temperature=0.0, max_tokens=64))
    assert model.name == "openai-compatible/Qwen/Qwen3-8B" and response.provider == "openai"
    assert response.message.parts[0] == ReasoningPart(content="think think")
    assert response.finish_reason == "tool_call"  # server said "stop" while calling a tool
    assert response.cost_usd is None
    body = server.bodies(OPENAI_PATH)[0]
    assert body["model"] == "Qwen/Qwen3-8B" and body["max_tokens"] == 64 and body["temperature"] == 0.0
    assert server.requests[0].headers["authorization"] == "Bearer sk-no-key"


def test_openai_compatible_needs_a_base_url():
    with pytest.raises(ModelConfigError, match="OPENAI_BASE_URL"):
        get_model("openai-compatible/llama")


# --- registry, keys, switch ---------------------------------------------------------------

@pytest.mark.parametrize("name,var", [("anthropic/claude-haiku-4-5", "ANTHROPIC_API_KEY"),
                                      ("openai/gpt-5", "OPENAI_API_KEY")])
def test_missing_api_key_names_the_variable(monkeypatch, name, var):
    monkeypatch.delenv(var)
    with pytest.raises(MissingApiKey, match=f"^{var} is not set$"):
        get_model(name)


@pytest.mark.parametrize("name", ["gemini/pro", "no-slash", "anthropic/"])
def test_unknown_provider_lists_known(name):
    with pytest.raises(UnknownProvider) as info:
        get_model(name)
    for provider in ("anthropic", "openai", "openai-compatible", "fake"):
        assert provider in str(info.value)


@pytest.mark.parametrize("block", ["context", "env", "flag"])
def test_switch_blocks_before_any_http(server, monkeypatch, block):
    server.reply(ANTHROPIC_PATH, anthropic_message([text("must not be seen")]))
    server.reply(OPENAI_PATH, openai_completion("must not be seen"))
    models = [get_model("anthropic/claude-haiku-4-5", base_url=server.url),
              get_model("openai/gpt-5", base_url=server.openai_url),
              get_model("openai-compatible/x", base_url=server.openai_url)]
    if block == "env":
        monkeypatch.setenv(base.ENV_SWITCH, "0")
    elif block == "flag":
        monkeypatch.setattr(base, "ALLOW_MODEL_REQUESTS", False)
    with allow_model_requests(False) if block == "context" else _nothing():
        for model in models:
            with pytest.raises(ModelRequestsBlocked):
                model.generate([Message.user("x")], [], settings("m"))
    assert server.requests == []


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# --- retry and pricing units --------------------------------------------------------------

def test_retry_after_parsing_and_cap():
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # past date
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None
    policy = RetryPolicy(max_retry_after=30)
    assert policy.delay(1, Failure(True, "rate_limit_error", "", 429, retry_after=3600)) == 30


def test_prices_by_name_and_snapshot_only(monkeypatch, tmp_path):
    assert price_for("anthropic/claude-sonnet-4-5-20250929") == price_for("claude-sonnet-4-5")
    assert price_for("claude-opus-4-20250514").input == 15.0
    assert price_for("claude-opus-4-5").input == 5.0
    assert price_for("gpt-5-mini-2025-08-07").output == 2.0
    for unknown in ("gpt-5-pro", "o3-pro", "claude-opus-4-7", "llama3"):
        assert price_for(unknown) is None
    assert cost_usd("llama3", Usage(input_tokens=10)) is None
    override = tmp_path / "prices.yaml"
    override.write_text("models:\n  llama3: {input: 1, output: 2}\n  gpt-5: {output: 99}\n")
    monkeypatch.setenv("METAOPT_PRICES", str(override))
    assert cost_usd("llama3", Usage(input_tokens=1_000_000, output_tokens=1_000_000)) == 3.0
    assert price_for("gpt-5").output == 99 and price_for("gpt-5").input == 1.25  # merged
    assert price_for("claude-haiku-4-5") is not None  # built-ins kept
