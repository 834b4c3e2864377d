"""Tracing wrappers: the agent loop stays free of tracing calls.

    with agent_span(tracer, agent_name="baseline", ..., provider=model.provider) as episode:
        model = TracedModel(model, tracer)          # chat {model} spans
        with tool_span(tracer, call.name, call.id, call.arguments) as t:   # execute_tool spans
            t.set_result(output, is_error=..., extra={"exit_code": 0, "duration": 0.2})
        episode.finish(usage, outcome="finished", error=None)

Nesting: `invoke_agent` > `chat` / `execute_tool` through the OpenTelemetry context, which also
carries the episode's state (ids copied onto every child span, what the last chat span recorded).
A worker thread sees it only when handed over: `contextvars.copy_context().run(...)`,
`with episode.activate():`, or `tool_span(..., context=episode.context)`.

Content: message content, reasoning, tool arguments and results are recorded as JSON-string
attributes unless METAOPT_TRACE_CONTENT=0, which replaces them by "[redacted]" (structure, roles,
tool names and ids stay). Values of *_API_KEY env vars are scrubbed from every string we set.

Each chat span stores only the conversation messages added since the previous chat span of the
episode (`gen_ai.input.messages`), with their position in `metaopt.input.offset`: the history
before call n is `history[:offset] + input` where history grows by each span's input and output.
When the history did not simply grow (compaction, a rewrite), the span records it all, offset 0.
System messages go to `gen_ai.system_instructions` and, like `gen_ai.tool.definitions`, are
recorded on the first chat span of an episode and again only when they change. Every chat span
carries `metaopt.system.sha256` (`prompt_sha256` of the system text it was sent), so a reader can
prove which prompt reached the model even when content is redacted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from metaopt.task_agent.messages import Message, ModelResponse, ModelSettings, ToolSpec, Usage
from metaopt.task_agent.models import split_name
from metaopt.task_agent.models.base import Model
from metaopt.traces.otel import REDACTED, scrub, secret_values

CONTENT_ENV = "METAOPT_TRACE_CONTENT"
_EPISODE = otel_context.create_key("metaopt.episode")
_CONTENT_KEYS = ("content", "arguments", "response", "signature", "data")


def content_recorded() -> bool:
    """False when METAOPT_TRACE_CONTENT is 0/false/no/off (read at each span)."""
    return os.environ.get(CONTENT_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


_encode = json.JSONEncoder(ensure_ascii=False, default=str).encode  # json.dumps(**kw) builds one per call


def _json(value: Any, secrets: list[str]) -> str:
    return scrub(_encode(value), secrets)


def _otel_messages(messages: list[Message], content: bool) -> list[dict[str, Any]]:
    out = [m.to_otel() for m in messages]
    if not content:  # keep roles, part types, tool names and ids; drop what was said
        out = [{**m, "parts": [{k: (REDACTED if k in _CONTENT_KEYS else v) for k, v in p.items()}
                               for p in m["parts"]]} for m in out]
    return out


@dataclass
class _Episode:
    """Per-episode state carried in the OTel context."""

    ids: dict[str, str]
    secrets: list[str]
    recorded: int = 0                     # conversation messages covered by earlier chat spans
    last: Message | None = None           # the last of them (the previous output, usually)
    tools: list[ToolSpec] | None = None   # tool definitions last recorded
    system: list[Message] | None = None   # system messages last recorded
    system_sha: str = ""                  # their prompt_sha256


def prompt_sha256(system_text: str) -> str:
    """sha256 (hex) of a system prompt as the model received it (system messages' text, joined
    by newlines): the value of `metaopt.system.sha256` on chat spans."""
    return hashlib.sha256(system_text.encode()).hexdigest()


def _fail(span: Span, exc: BaseException, secrets: list[str]) -> None:
    """ERROR status + error.type; the exception event is scrubbed (SDK messages can quote keys)."""
    message = scrub(str(exc), secrets)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {message}"))
    span.set_attribute("error.type", type(exc).__name__)
    span.add_event("exception", {
        "exception.type": type(exc).__name__, "exception.message": message,
        "exception.stacktrace": scrub("".join(traceback.format_exception(exc)), secrets)})


def _traceparent(span: Span) -> str:
    c = span.get_span_context()  # W3C traceparent, for TRACEPARENT in a sandbox exec
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


def _episode(context: otel_context.Context | None = None) -> _Episode | None:
    """The episode whose span is current in `context` (default: the current context), if any."""
    ep = otel_context.get_value(_EPISODE, context)
    return ep if isinstance(ep, _Episode) else None


class TracedModel:
    """A Model whose every generate() call is a CLIENT span `chat {request model}`.

    Same contract as the wrapped model: returns its ModelResponse, re-raises its exceptions
    (after marking the span ERROR with error.type = the exception class name). Outside an
    agent_span there is no episode state: every span records the whole history."""

    def __init__(self, model: Model, tracer: trace.Tracer):
        self.model, self.tracer = model, tracer
        self.name, self.provider = model.name, model.provider

    def __getattr__(self, item: str) -> Any:  # .calls, .unused_steps, ... of the wrapped model
        if item == "model":  # not set yet (copy, pickle): do not recurse
            raise AttributeError(item)
        return getattr(self.model, item)

    def generate(self, messages: list[Message], tools: list[ToolSpec],
                 settings: ModelSettings) -> ModelResponse:
        ep = _episode()
        secrets = ep.secrets if ep else secret_values()
        content = content_recorded()
        full = settings.model or self.name
        request_model = split_name(full)[2] or full
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": request_model, "gen_ai.request.max_tokens": settings.max_tokens,
            **(ep.ids if ep else {}),
        }
        if settings.temperature is not None:
            attrs["gen_ai.request.temperature"] = settings.temperature
        if settings.reasoning_effort is not None:
            attrs["metaopt.request.reasoning_effort"] = settings.reasoning_effort
        system = [m for m in messages if m.role == "system"]
        conv = [m for m in messages if m.role != "system"]
        offset = 0
        if ep and 0 < ep.recorded <= len(conv) and (conv[ep.recorded - 1] is ep.last
                                                    or conv[ep.recorded - 1] == ep.last):
            offset = ep.recorded
        if ep is None or ep.system != system:
            parts = [p for m in _otel_messages(system, content) for p in m["parts"]]
            attrs["gen_ai.system_instructions"] = _json(parts, secrets)
            sha = prompt_sha256("\n".join(m.text for m in system))
        else:
            sha = ep.system_sha
        attrs["metaopt.system.sha256"] = sha
        if ep is None or ep.tools != tools:
            attrs["gen_ai.tool.definitions"] = _json([t.to_otel() for t in tools], secrets)
        attrs["gen_ai.input.messages"] = _json(_otel_messages(conv[offset:], content), secrets)
        attrs["metaopt.input.offset"] = offset
        span = self.tracer.start_span(f"chat {request_model}", kind=SpanKind.CLIENT, attributes=attrs)
        if ep:
            ep.system, ep.tools, ep.system_sha = system, list(tools), sha
            ep.recorded, ep.last = len(conv), (conv[-1] if conv else None)
        with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
            try:
                response = self.model.generate(messages, tools, settings)
            except BaseException as exc:
                _fail(span, exc, secrets)
                raise
            if ep:
                ep.recorded, ep.last = len(conv) + 1, response.message
            span.set_attributes(_response_attributes(response, content, secrets))
        return response


def _response_attributes(r: ModelResponse, content: bool, secrets: list[str]) -> dict[str, Any]:
    out = _otel_messages([r.message], content)[0]
    out["finish_reason"] = r.finish_reason
    attrs: dict[str, Any] = {
        "gen_ai.output.messages": _json([out], secrets),
        "gen_ai.response.model": r.model, "gen_ai.response.finish_reasons": [r.finish_reason],
        **usage_attributes(r.usage),
    }
    optional = {"gen_ai.response.id": r.response_id, "server.address": r.server_address,
                "server.port": r.server_port, "metaopt.cost_usd": r.cost_usd}
    attrs.update({k: v for k, v in optional.items() if v is not None})
    if r.unparsed_output is not None:
        attrs["metaopt.response.unparsed_output"] = scrub(r.unparsed_output, secrets) if content else REDACTED
    return attrs


def usage_attributes(usage: Usage | Mapping[str, int]) -> dict[str, int]:
    """gen_ai.usage.* attributes of a Usage (or a dict with Usage's field names)."""
    u = usage.model_dump() if isinstance(usage, Usage) else dict(usage)
    names = {"input_tokens": "gen_ai.usage.input_tokens", "output_tokens": "gen_ai.usage.output_tokens",
             "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
             "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
             "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens"}
    return {attr: int(u[k]) for k, attr in names.items() if u.get(k) is not None}


class ToolSpanHandle:
    """What `tool_span` yields. `traceparent` is the W3C header of this span, for the sandbox."""

    def __init__(self, span: Span, secrets: list[str], content: bool):
        self.span, self._secrets, self._content = span, secrets, content

    @property
    def traceparent(self) -> str:
        return _traceparent(self.span)

    def set_result(self, text: str, is_error: bool = False, extra: dict[str, Any] | None = None) -> None:
        """Record the tool's result text and `extra` as metaopt.tool.<key> (exit_code, timed_out,
        truncated, duration, ...). `is_error` sets status ERROR, error.type timeout|tool_error."""
        attrs: dict[str, Any] = {
            "gen_ai.tool.call.result": scrub(text, self._secrets) if self._content else REDACTED}
        for k, v in (extra or {}).items():
            if isinstance(v, str):
                v = scrub(v, self._secrets)
            elif v is not None and not isinstance(v, (bool, int, float)):
                v = _json(v, self._secrets)  # OTel attributes take scalars only
            if v is not None:
                attrs[f"metaopt.tool.{k}"] = v
        self.span.set_attributes(attrs)
        if is_error:
            kind = "timeout" if (extra or {}).get("timed_out") else "tool_error"
            self.span.set_attribute("error.type", kind)
            self.span.set_status(Status(StatusCode.ERROR, kind))


@contextlib.contextmanager
def tool_span(tracer: trace.Tracer, name: str, call_id: str, arguments: dict[str, Any],
              description: str | None = None, *,
              context: otel_context.Context | None = None) -> Iterator[ToolSpanHandle]:
    """An INTERNAL `execute_tool {name}` span around one tool call, child of the current span
    (or of `context`'s). An exception inside marks it ERROR and propagates."""
    ep = _episode(context)
    secrets = ep.secrets if ep else secret_values()
    content = content_recorded()
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": _json(arguments, secrets) if content else REDACTED,
        **(ep.ids if ep else {}),
    }
    if description:
        attrs["gen_ai.tool.description"] = description
    span = tracer.start_span(f"execute_tool {name}", context=context, kind=SpanKind.INTERNAL, attributes=attrs)
    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        try:
            yield ToolSpanHandle(span, secrets, content)
        except BaseException as exc:
            _fail(span, exc, secrets)
            raise


class AgentSpanHandle:
    """What `agent_span` yields: ids of the episode's trace, its context for worker threads."""

    def __init__(self, span: Span, ctx: otel_context.Context, secrets: list[str]):
        self.span, self.context, self._secrets = span, ctx, secrets
        c = span.get_span_context()
        self.trace_id, self.span_id = format(c.trace_id, "032x"), format(c.span_id, "016x")
        self.traceparent = _traceparent(span)

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """Make this episode current in this thread (for a worker thread)."""
        token = otel_context.attach(self.context)
        try:
            yield
        finally:
            otel_context.detach(token)

    def finish(self, usage_totals: Usage | Mapping[str, int] | None, outcome: str,
               error: str | None = None, cost_usd: float | None = None) -> None:
        """Aggregated usage (and cost), metaopt.outcome; an `error` sets status ERROR with
        error.type = outcome (low-cardinality by design)."""
        attrs: dict[str, Any] = {"metaopt.outcome": outcome, **usage_attributes(usage_totals or {})}
        if cost_usd is not None:
            attrs["metaopt.cost_usd"] = cost_usd
        self.span.set_attributes(attrs)
        if error:
            self.span.set_attribute("error.type", outcome)
            self.span.set_status(Status(StatusCode.ERROR, scrub(error, self._secrets)))


@contextlib.contextmanager
def agent_span(tracer: trace.Tracer, *, agent_name: str, harness_version: str | None,
               conversation_id: str, run_id: str | None, trial_id: str | None,
               task_id: str | None, provider: str, description: str | None = None,
               context: otel_context.Context | None = None) -> Iterator[AgentSpanHandle]:
    """An INTERNAL `invoke_agent {agent_name}` span for one episode, made current for the
    block; run/trial/task ids are also copied onto every chat and tool span inside it. An
    exception inside marks it ERROR and propagates."""
    ids = {k: v for k, v in (("metaopt.run.id", run_id), ("metaopt.trial.id", trial_id),
                             ("metaopt.task.id", task_id)) if v is not None}
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": provider,
        "gen_ai.agent.name": agent_name, "gen_ai.conversation.id": conversation_id, **ids,
    }
    if harness_version is not None:
        attrs["gen_ai.agent.version"] = harness_version
        attrs["gen_ai.agent.id"] = f"{agent_name}@{harness_version}"
    if description:
        attrs["gen_ai.agent.description"] = description
    span = tracer.start_span(f"invoke_agent {agent_name}", context=context, kind=SpanKind.INTERNAL,
                             attributes=attrs)
    ep = _Episode(ids=ids, secrets=secret_values())
    ctx = otel_context.set_value(_EPISODE, ep, trace.set_span_in_context(span, context))
    token = otel_context.attach(ctx)
    try:
        yield AgentSpanHandle(span, ctx, ep.secrets)
    except BaseException as exc:
        _fail(span, exc, ep.secrets)
        raise
    finally:
        otel_context.detach(token)
        span.end()
