"""The harness as a Harbor agent: `harbor run --agent-import-path <package>.harbor_agent:HarnessHarborAgent`.

The loop is the exported package's own (harness_agent.py, the loop metaopt optimized). It runs in
a worker thread; shell and python tools go to Harbor's environment (`environment.exec`, on the
event loop), the model is Harbor's `--model` (anthropic/, openai/ or openai-compatible/<model>;
keys from ANTHROPIC_API_KEY / OPENAI_API_KEY, the server from OPENAI_BASE_URL / ANTHROPIC_BASE_URL
or the agent kwarg `api_base`: `--ak api_base=http://...`; Harbor itself refuses
`base_url` for agents without a model-connection spec). After the episode the agent writes an
ATIF trajectory to its logs folder (`/logs/agent/trajectory.json` in the environment) and puts
the token counts in Harbor's AgentContext. Cost stays unset: the package carries no price list.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from datetime import UTC, datetime
from functools import partial
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.agents.capabilities import AgentCapabilities
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.trajectories import Agent, FinalMetrics, Metrics, Observation, ObservationResult, Step, ToolCall
from harbor.models.trajectories import Trajectory

from .harness_agent import HarnessAgent, load_harness
from .harness_models import get_model
from .harness_runtime import Result, stateful_command

HARNESS = load_harness()


class HarnessHarborAgent(BaseAgent):
    """The exported harness as a Harbor agent."""

    capabilities = AgentCapabilities(atif=True)

    def __init__(self, *args: Any, api_base: str | None = None, timeout_s: float | None = None, **kwargs: Any):
        self._harness_base_url = api_base
        self._timeout_s = float(timeout_s) if timeout_s is not None else None
        super().__init__(*args, **kwargs)

    @staticmethod
    def name() -> str:
        return f"metaopt-{HARNESS['name']}"

    def version(self) -> str | None:
        return HARNESS.get("version") or "exported"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None  # the loop runs here; tools run in the environment

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        name = self.model_name or HARNESS.get("model", {}).get("model")
        if not name:
            raise ValueError("no model: pass harbor run -m PROVIDER/MODEL (the harness names none)")
        client = _counting(_client(name, self._harness_base_url), name.partition("/")[0])
        loop = asyncio.get_running_loop()
        agent = HarnessAgent(_Recording(get_model(name, client=client), client), HarborExecutor(environment, loop),
                             HARNESS)
        started = datetime.now(UTC)
        ep = await asyncio.to_thread(agent.run, instruction, self._timeout_s)
        usage = client.totals()
        context.n_input_tokens, context.n_output_tokens = usage["input"], usage["output"]
        context.n_cache_tokens = usage["cached"]
        context.metadata = {"outcome": ep.outcome, "turns": ep.turns, "tool_calls": ep.tool_calls,
                            "error": ep.error, "summary": ep.summary}
        trajectory = to_atif(ep.messages, agent.model.steps, name, self.name(), self.version() or "", started)
        (self.logs_dir / "trajectory.json").write_text(trajectory.model_dump_json(indent=2, exclude_none=True))


class HarborExecutor:
    """The harness's Executor over Harbor's environment (called from the worker thread). The
    persistent session is emulated: cwd and exported variables are saved after each call."""

    def __init__(self, environment: BaseEnvironment, loop: asyncio.AbstractEventLoop) -> None:
        self.environment, self.loop = environment, loop
        self.state = f"/tmp/.harness-session-{secrets.token_hex(6)}"

    def run(self, command: str, *, timeout: float, fresh: bool = False, user: str | None = None) -> Result:
        script = command if fresh else stateful_command(command, self.state)
        call = self.environment.exec(f"bash -c {_quote(script)}", timeout_sec=max(1, math.ceil(timeout)), user=user)
        try:
            r = asyncio.run_coroutine_threadsafe(call, self.loop).result()
        except (TimeoutError, asyncio.TimeoutError):
            return Result("", "", 124, timed_out=True)
        except RuntimeError as e:  # Harbor raises RuntimeError on an exec timeout
            if "timed out" not in str(e).lower():
                raise
            return Result("", "", 124, timed_out=True)
        return Result(r.stdout or "", r.stderr or "", r.return_code)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _client(name: str, base_url: str | None) -> Any:
    provider = name.partition("/")[0]
    if provider == "anthropic":
        import anthropic

        return anthropic.Anthropic(base_url=base_url) if base_url else anthropic.Anthropic()
    import openai

    return openai.OpenAI(base_url=base_url) if base_url else openai.OpenAI()


class _counting:  # noqa: N801 - reads as a function: wraps an SDK client
    """An SDK client that records each response's usage (chat.completions / messages)."""

    def __init__(self, client: Any, provider: str) -> None:
        self._client, self.provider, self.usage = client, provider, []

    @property
    def chat(self) -> Any:
        return self

    @property
    def completions(self) -> Any:
        return self

    @property
    def messages(self) -> Any:
        return self

    def create(self, **request: Any) -> Any:
        api = self._client.messages if self.provider == "anthropic" else self._client.chat.completions
        response = api.create(**request)
        u = getattr(response, "usage", None)
        inp = getattr(u, "prompt_tokens", None) if u is not None else None
        if inp is None and u is not None:  # anthropic: input excludes cache reads
            inp = (u.input_tokens or 0) + (getattr(u, "cache_read_input_tokens", 0) or 0)
        out = (getattr(u, "completion_tokens", None) or getattr(u, "output_tokens", 0) or 0) if u is not None else 0
        details = getattr(u, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", 0) or 0) if details is not None else \
            (getattr(u, "cache_read_input_tokens", 0) or 0)
        self.usage.append({"input": int(inp or 0), "output": int(out), "cached": int(cached)})
        return response

    def totals(self) -> dict[str, int]:
        return {k: sum(u[k] for u in self.usage) for k in ("input", "output", "cached")}


class _Recording:
    """The harness's Model, remembering each call's usage for the trajectory's step metrics."""

    def __init__(self, model: Any, client: _counting) -> None:
        self.model, self.client, self.steps = model, client, []

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                 settings: dict[str, Any]) -> dict[str, Any]:
        reply = self.model.generate(messages, tools, settings)
        self.steps.append((datetime.now(UTC), self.client.usage[-1] if self.client.usage else None))
        return reply


def to_atif(messages: list[dict[str, Any]], calls: list[tuple[datetime, dict | None]], model: str,
            agent_name: str, version: str, started: datetime) -> Trajectory:
    """The episode's messages as an ATIF trajectory: system, user, then one agent step per model
    reply with its tool calls and, as its observation, the tool results that followed."""
    steps: list[Step] = []
    usage_at = iter(calls)
    stamp = started.isoformat()
    for i, m in enumerate(messages):
        text = "\n".join(p["content"] for p in m["parts"] if p["type"] == "text")
        if m["role"] in ("system", "user"):
            steps.append(Step(step_id=len(steps) + 1, timestamp=stamp, source=m["role"], message=text))
        elif m["role"] == "assistant":
            when, usage = next(usage_at, (started, None))
            reasoning = "\n".join(p.get("content") or "" for p in m["parts"] if p["type"] == "reasoning") or None
            tcs = [ToolCall(tool_call_id=p["id"], function_name=p["name"], arguments=p.get("arguments") or {})
                   for p in m["parts"] if p["type"] == "tool_call"]
            nxt = messages[i + 1] if i + 1 < len(messages) and messages[i + 1]["role"] == "tool" else None
            results = [ObservationResult(source_call_id=p["id"], content=p["response"])
                       for p in (nxt or {"parts": []})["parts"] if p["type"] == "tool_call_response"]
            steps.append(Step(
                step_id=len(steps) + 1, timestamp=when.isoformat(), source="agent", model_name=model, message=text,
                reasoning_content=reasoning, tool_calls=tcs or None,
                observation=Observation(results=results) if results else None,
                metrics=Metrics(prompt_tokens=usage["input"], completion_tokens=usage["output"],
                                cached_tokens=usage["cached"]) if usage else None))
    used = [u for _, u in calls if u]
    return Trajectory(
        schema_version="ATIF-v1.6", session_id=secrets.token_hex(8),
        agent=Agent(name=agent_name, version=version, model_name=model,
                    tool_definitions=[{"type": "function", "function": {
                        "name": t["name"], "description": t["description"], "parameters": t["parameters"]}}
                        for t in HARNESS["tools"]]),
        steps=steps,
        final_metrics=FinalMetrics(total_prompt_tokens=sum(u["input"] for u in used),
                                   total_completion_tokens=sum(u["output"] for u in used),
                                   total_cached_tokens=sum(u["cached"] for u in used), total_steps=len(steps)))
