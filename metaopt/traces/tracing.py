"""Tracing for the task agent, as wrappers: one provider per store, a traced model, a wrapper
around each tool call, and an episode span. The agent loop itself knows nothing of tracing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from metaopt.task_agent.messages import ToolCallPart, ToolResultPart
from metaopt.task_agent.tools import ToolOutcome
from metaopt.traces.exporter import DuckDBSpanExporter
from metaopt.traces.instrument import AgentSpanHandle, TracedModel, agent_span, tool_span
from metaopt.traces.otel import get_tracer, make_tracer_provider
from metaopt.traces.store import Store

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from metaopt.task_agent.models.base import Model


class Tracing:
    """Everything one process needs to trace episodes into its store."""

    def __init__(self, provider: TracerProvider):
        self.provider = provider
        self.tracer = get_tracer(provider)

    @classmethod
    def for_store(cls, store: Store) -> Tracing:
        return cls(make_tracer_provider(exporters=[DuckDBSpanExporter(store)]))

    def wrap(self, model: Model) -> tuple[TracedModel, Callable]:
        """(the model as a traced model, a call wrapper for TaskAgent(wrap_call=...))."""
        tracer = self.tracer

        def wrap_call(call: ToolCallPart, dispatch: Callable[[], tuple[ToolResultPart, ToolOutcome | None]]):
            with tool_span(tracer, call.name, call.id, call.arguments) as span:
                part, outcome = dispatch()
                extra = None
                if outcome is not None:
                    extra = {"exit_code": outcome.exit_code, "timed_out": outcome.timed_out,
                             "truncated": outcome.truncated, "output_chars": outcome.full_length,
                             "duration_s": round(outcome.duration_s, 4)}
                if call.arguments_error:
                    extra = {"arguments_error": call.arguments_error}
                span.set_result(part.response, is_error=part.is_error, extra=extra)
            return part, outcome

        return TracedModel(model, tracer), wrap_call

    @contextlib.contextmanager
    def episode(self, **ids: Any) -> Iterator[AgentSpanHandle]:
        """An invoke_agent span around one episode; its spans are in the store when this exits."""
        try:
            with agent_span(self.tracer, **ids) as handle:
                yield handle
        finally:
            self.provider.force_flush()

    def shutdown(self) -> None:
        self.provider.shutdown()
