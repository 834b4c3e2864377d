"""Deterministic test doubles, shipped in the package: `fake/nop`, `fake/script:PATH`,
`fake/solution`, `fake/flaky:P`, `fake/slow:S:MODEL` (fake/MODEL taking S seconds per call, as an
API model would) (and `fake/replay:PATH`, in models/replay.py). They never touch the network, cost 0, report provider "fake", and
estimate tokens as characters // 4. Each records the calls it received in `.calls`.

One instance per episode: scripted and solution fakes keep a step counter. Their base (`FakeModel`,
which records the calls and adds usage) is in models/fake_base.py, below every fake.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import yaml

from metaopt.core.errors import ModelConfigError
from metaopt.task_agent.messages import Message, ModelResponse, ModelSettings, ReasoningPart, TextPart, ToolSpec
from metaopt.task_agent.models.fake_base import FakeCall, FakeModel

__all__ = ["EXHAUSTED", "FakeCall", "FakeModel", "FlakyModel", "NopModel", "ScriptModel", "SlowModel", "SolutionModel",
           "create", "flaky_replays", "needs_task"]

EXHAUSTED = "script exhausted"
_STEP_KEYS = {"tool", "arguments", "tool_calls", "text", "reasoning", "id"}
_CALL_KEYS = {"tool", "name", "arguments", "id"}


class NopModel(FakeModel):
    """`fake/nop`: always answers "I will do nothing." and calls no tool."""

    name = "fake/nop"

    def respond(self, messages: list[Message], tools: list[ToolSpec]) -> list[Any]:
        return [TextPart(content="I will do nothing.")]


class ScriptModel(FakeModel):
    """`fake/script:PATH`: each call consumes one step of a YAML/JSON list. A step has any of
    `text`, `reasoning`, `tool` + `arguments` (+ `id`), `tool_calls: [{tool, arguments, id}]`.
    When the steps run out it answers "script exhausted" (finish_reason stop) and counts the
    extra calls in `.overrun`; `.unused_steps` lists the steps never consumed."""

    def __init__(self, steps: list[dict[str, Any]], *, source: str = "<steps>") -> None:
        super().__init__()
        self.name = f"fake/script:{source}"
        self.steps = [_check_step(s, i, source) for i, s in enumerate(steps)]
        self.position = 0
        self.overrun = 0

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptModel:
        path = Path(path)
        try:
            steps = yaml.safe_load(path.read_text())  # YAML is a superset of JSON
        except (OSError, yaml.YAMLError) as exc:
            raise ModelConfigError(f"cannot read fake script {path}: {exc}") from None
        if not isinstance(steps, list):
            raise ModelConfigError(f"fake script {path} must be a list of steps")
        return cls(steps, source=str(path))

    @property
    def unused_steps(self) -> list[dict[str, Any]]:
        return self.steps[self.position:]

    def respond(self, messages: list[Message], tools: list[ToolSpec]) -> list[Any]:
        if self.position >= len(self.steps):
            self.overrun += 1
            return [TextPart(content=EXHAUSTED)]
        step = self.steps[self.position]
        self.position += 1
        parts: list[Any] = []
        if "reasoning" in step:
            parts.append(ReasoningPart(content=str(step["reasoning"])))
        if "text" in step:
            parts.append(TextPart(content=str(step["text"])))
        calls = step.get("tool_calls", [])
        if "tool" in step:
            calls = [step, *calls]
        for call in calls:
            parts.append(self._call(call.get("tool") or call["name"],
                                    dict(call.get("arguments") or {}), call.get("id")))
        return parts


def _check_step(step: Any, index: int, source: str) -> dict[str, Any]:
    where = f"fake script {source} step {index}"
    if not isinstance(step, dict):
        raise ModelConfigError(f"{where}: must be a mapping, got {step!r}")
    if unknown := set(step) - _STEP_KEYS:
        raise ModelConfigError(f"{where}: unknown keys {sorted(unknown)}; allowed {sorted(_STEP_KEYS)}")
    if not _STEP_KEYS & set(step) - {"arguments", "id"}:
        raise ModelConfigError(f"{where}: needs text, reasoning, tool or tool_calls")
    for call in step.get("tool_calls", []):
        if not isinstance(call, dict) or set(call) - _CALL_KEYS or not (call.get("tool") or call.get("name")):
            raise ModelConfigError(f"{where}: each tool_calls entry needs tool and arguments, got {call!r}")
    return step


class SolutionModel(FakeModel):
    """`fake/solution`: replays a task's oracle solution, one command per tool call.

    context: `solution_commands` (list of shell commands, required) and `tool` (default "bash").
    Call i (i < n) returns `tool({"command": commands[i]})`; call n returns a `finish` tool call
    when a tool named finish is offered, else the text "Done."; later calls answer "Done."."""

    name = "fake/solution"

    def __init__(self, context: dict[str, Any] | None) -> None:
        super().__init__()
        commands = (context or {}).get("solution_commands")
        if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
            raise ModelConfigError("fake/solution needs context['solution_commands']: a list of commands")
        self.commands: list[str] = commands
        self.tool: str = (context or {}).get("tool") or "bash"
        self.position = 0

    def respond(self, messages: list[Message], tools: list[ToolSpec]) -> list[Any]:
        step, self.position = self.position, self.position + 1
        if step < len(self.commands):
            return [self._call(self.tool, {"command": self.commands[step]})]
        if step == len(self.commands) and any(t.name == "finish" for t in tools):
            return [self._call("finish", {"summary": "Replayed the task's own solution."})]
        return [TextPart(content="Done.")]


def flaky_replays(p: float, trial_id: str) -> bool:
    """Whether `fake/flaky:p` replays the solution in trial `trial_id`: a uniform draw in [0, 1) from
    the SHA-256 of the trial id, below p. Same id, same answer, on any machine; coupled across p
    (a trial that replays at p replays at every p' > p)."""
    u = int.from_bytes(hashlib.sha256(trial_id.encode()).digest()[:8], "big") / 2.0 ** 64
    return u < p


class FlakyModel(SolutionModel):
    """`fake/flaky:P`: real noise for null experiments. With probability P per trial it replays the
    task's solution (as fake/solution), otherwise it does nothing (as fake/nop), whatever the
    harness says: no harness edit can change its score, so every gain a gate sees is noise.

    context: `trial_id` (required: the coin is seeded by it) and `stage_solution`, a callable that
    puts the solution's files in place and returns its commands; it is called only when the coin
    says replay, so a trial that does nothing never sees the solution's files."""

    def __init__(self, p: float, context: dict[str, Any] | None) -> None:
        ctx = context or {}
        trial_id, stage = ctx.get("trial_id"), ctx.get("stage_solution")
        if not isinstance(trial_id, str) or not trial_id:
            raise ModelConfigError("fake/flaky needs context['trial_id']: the coin is seeded by the trial id")
        if not callable(stage):
            raise ModelConfigError("fake/flaky needs context['stage_solution']: a callable returning the solution's commands")
        self.p, self.trial_id = p, trial_id
        self.replays = flaky_replays(p, trial_id)
        stage_fn = cast("Callable[[], list[str]]", stage)  # the contract of context['stage_solution']
        super().__init__({"solution_commands": list(stage_fn()) if self.replays else [], "tool": ctx.get("tool")})
        self.name = f"fake/flaky:{p:g}"

    def respond(self, messages: list[Message], tools: list[ToolSpec]) -> list[Any]:
        if not self.replays:
            return [TextPart(content="I will do nothing.")]
        return super().respond(messages, tools)


class SlowModel:
    """`fake/slow:S:MODEL`: fake/MODEL, each call taking S seconds more (waiting, as on an API model:
    no CPU), so benchmarks of concurrency see the latency real models have."""

    provider = "fake"

    def __init__(self, seconds: float, inner: Any) -> None:
        self.seconds, self.inner = seconds, inner
        self.name = f"fake/slow:{seconds:g}:{inner.name.partition('/')[2]}"

    @property
    def calls(self) -> list[FakeCall]:
        return self.inner.calls

    def generate(self, messages: list[Message], tools: list[ToolSpec], settings: ModelSettings) -> ModelResponse:
        time.sleep(self.seconds)
        return self.inner.generate(messages, tools, settings)


def _slow(model: str) -> tuple[float, str]:
    """(S, MODEL) of `slow:S:MODEL`; ModelConfigError when malformed."""
    seconds, _, inner = model[len("slow:"):].partition(":")
    try:
        s = float(seconds)
    except ValueError:
        s = -1.0
    if s < 0 or not inner:
        raise ModelConfigError(f"fake/{model}: give fake/slow:SECONDS:MODEL (e.g. fake/slow:0.5:flaky:0.5)")
    return s, inner


def needs_task(name: str) -> bool:
    """Whether the model called `name` is a fake built per trial from the task (`fake/solution`,
    `fake/flaky:P`, `fake/replay:PATH`), so it can only be created inside a trial. Raises ModelConfigError for a
    malformed P, so a command line can reject it before any trial runs."""
    provider, _, model = name.partition("/")
    if provider != "fake":
        return False
    if model.startswith("slow:"):
        return needs_task(f"fake/{_slow(model)[1]}")
    if model.startswith("flaky:"):
        _flaky_p(model)
        return True
    if model.startswith("replay:"):  # its policy is checked now; the task id comes with the trial
        from metaopt.task_agent.models.replay import load_policies

        load_policies(model[len("replay:"):])
        return True
    return model == "solution"


def _flaky_p(model: str) -> float:
    text = model[len("flaky:"):]
    try:
        p = float(text)
    except ValueError:
        p = -1.0
    if not 0.0 <= p <= 1.0:
        raise ModelConfigError(f"fake/flaky:{text}: P must be a number between 0 and 1 (e.g. fake/flaky:0.5)")
    return p


def create(model: str, *, base_url: str | None = None,
           context: dict[str, Any] | None = None) -> FakeModel | SlowModel:
    """Registry factory for `fake/<model>`."""
    if model.startswith("slow:"):
        seconds, inner = _slow(model)
        return SlowModel(seconds, create(inner, base_url=base_url, context=context))
    if model == "nop":
        return NopModel()
    if model == "solution":
        return SolutionModel(context)
    if model.startswith("script:") and model[len("script:"):]:
        return ScriptModel.from_file(model[len("script:"):])
    if model.startswith("flaky:"):
        return FlakyModel(_flaky_p(model), context)
    if model.startswith("replay:") and model[len("replay:"):]:
        from metaopt.task_agent.models.replay import ReplayModel

        return ReplayModel(model[len("replay:"):], context)
    raise ModelConfigError(
        f"unknown fake model fake/{model}; known: fake/nop, fake/script:PATH, fake/solution, fake/flaky:P, fake/slow:S:MODEL, fake/replay:PATH")
