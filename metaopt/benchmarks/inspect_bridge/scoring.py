"""Score a finished trial of an inspect sample with the inspect task's own scorers.

The agent's transcript becomes an inspect TaskState (messages, and output = the agent's final
answer: its finish summary or last message); the trial's live sandbox is the inspect sandbox, so a
scorer's `sandbox().exec(...)` sees the container the agent left. Each scorer's Score.value maps
to a float the way inspect's metrics do (value_to_float; a dict or list value is the mean of its
elements); the trial's score is the mean over scorers. A scorer that raises is an `error` trial,
never a 0.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from metaopt.benchmarks.inspect_bridge.loader import loaded
from metaopt.benchmarks.scorers import Verification, VerifyContext
from metaopt.benchmarks.scoring import Verdict
from metaopt.benchmarks.task import Task
from metaopt.sandbox.base import Sandbox
from metaopt.task_agent.messages import Message, ToolCallPart, ToolResultPart, Transcript

MODEL_NAME = "metaopt/harness-agent"


def verify_inspect(task: Task, sb: Sandbox, ctx: VerifyContext) -> Verification:
    """The `inspect` scorer: the task's own inspect scorers on the agent's transcript."""
    return Verification(*score_inspect(task, sb, ctx.transcript, task.verifier.timeout_s * ctx.timeout_multiplier,
                                       ctx.attempt))


def score_inspect(task: Task, sb: Sandbox, transcript: Transcript | None, timeout_s: float,
                  attempt: int = 0) -> tuple[Verdict, str, None]:
    """(verdict, output, None): output is JSON {scorer: {value, answer, explanation, metadata}}."""
    lt = loaded(task.benchmark.removeprefix("inspect:"))
    sample = lt.samples[task.id]
    transcript = transcript or Transcript()
    state = task_state(sample, transcript.messages, transcript.final_text, epoch=attempt + 1)
    try:
        scores = asyncio.run(asyncio.wait_for(_run_scorers(lt.task.scorer, state, sample, sb, task.workdir),
                                              timeout_s))
    except TimeoutError:
        return Verdict(0.0, "timeout", failure_mode="test_timeout",
                       error=f"inspect scorers ran past {timeout_s:.0f} s"), "", None
    except Exception as e:  # noqa: BLE001 - the task's own scorer failed: an error trial, not a 0
        return Verdict(None, "error", failure_mode="scorer_error", error=f"inspect scorer raised {type(e).__name__}: {e}"), "", None
    floats = {name: to_float(s.value) for name, s in scores.items()}
    output = json.dumps({name: {"value": s.value, "answer": s.answer, "explanation": s.explanation,
                                "metadata": s.metadata} for name, s in scores.items()}, default=str)
    score = sum(floats.values()) / len(floats)
    status = "passed" if score >= 1.0 else "failed"
    return Verdict(score, status, failure_mode=None if status == "passed" else "tests_failed",
                   rewards=floats), output, None


async def _run_scorers(scorers: list[Any], state: Any, sample: Any, sb: Sandbox, workdir: str | None) -> dict[str, Any]:
    from inspect_ai._util.registry import registry_unqualified_name
    from inspect_ai.scorer import Target
    from inspect_ai.util._sandbox.context import (
        sandbox_default_context_var,
        sandbox_environments_context_var,
        sandbox_with_environments_context_var,
    )

    from metaopt.sandbox.inspect_env import MetaoptSandboxEnvironment

    # What inspect's own scoring sets up (inspect_ai/_control/scoring.py): the sample's sandboxes
    # with the first one as default. Context variables: this coroutine's copy only.
    sandbox_environments_context_var.set({"default": MetaoptSandboxEnvironment(sb, workdir or "/")})
    sandbox_default_context_var.set("default")
    sandbox_with_environments_context_var.set({})
    target = Target(sample.target)
    out: dict[str, Any] = {}
    for i, scorer in enumerate(scorers):
        try:
            name = registry_unqualified_name(scorer)
        except Exception:  # noqa: BLE001 - a plain function that was never registered
            name = f"scorer_{i}"
        score = await scorer(state, target)
        if score is None:
            raise ValueError(f"{name} returned no Score")
        out[name if name not in out else f"{name}_{i}"] = score
    return out


def to_float(value: Any) -> float:
    """Score.value -> float as inspect's metrics read it (C=1, I=0, P=0.5, N=0, numbers as such)."""
    from inspect_ai.scorer import value_to_float

    f = value_to_float()
    if isinstance(value, dict):
        return sum(f(v) for v in value.values()) / len(value) if value else 0.0
    if isinstance(value, list):
        return sum(f(v) for v in value) / len(value) if value else 0.0
    return float(f(value))


def task_state(sample: Any, messages: list[Message], answer: str, *, epoch: int = 1) -> Any:
    """The TaskState inspect would hand its scorers after a solver produced `messages` and `answer`."""
    from inspect_ai.model import ModelName, ModelOutput
    from inspect_ai.scorer import Target
    from inspect_ai.solver import TaskState

    return TaskState(
        model=ModelName(MODEL_NAME), sample_id=sample.id if sample.id is not None else 0, epoch=epoch,
        input=sample.input, messages=chat_messages(messages) or _input_messages(sample),
        target=Target(sample.target), choices=sample.choices, output=ModelOutput.from_content(MODEL_NAME, answer),
        metadata=sample.metadata or {}, completed=True,
    )


def _input_messages(sample: Any) -> list[Any]:
    from inspect_ai.model import ChatMessageUser

    return [ChatMessageUser(content=sample.input)] if isinstance(sample.input, str) else list(sample.input)


def chat_messages(messages: list[Message]) -> list[Any]:
    """Our transcript as inspect ChatMessages (reasoning dropped; tool results one message each)."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall, ToolCallError

    out: list[Any] = []
    names: dict[str, str] = {}
    for m in messages:
        if m.role == "system":
            out.append(ChatMessageSystem(content=m.text))
        elif m.role == "user":
            out.append(ChatMessageUser(content=m.text))
        elif m.role == "assistant":
            calls = [ToolCall(id=c.id, function=c.name, arguments=c.arguments) for c in m.parts
                     if isinstance(c, ToolCallPart)]
            names.update({c.id: c.function for c in calls})
            out.append(ChatMessageAssistant(content=m.text, tool_calls=calls or None, model=MODEL_NAME))
        else:
            for p in m.parts:
                if isinstance(p, ToolResultPart):
                    out.append(ChatMessageTool(content=p.response, tool_call_id=p.id, function=names.get(p.id),
                                               error=ToolCallError("unknown", p.response) if p.is_error else None))
    return out
