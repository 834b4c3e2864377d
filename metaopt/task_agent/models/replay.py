"""`fake/replay:PATH`: a deterministic task model whose behaviour depends on the harness it is given.

It plays a task from a policy (a YAML file whose `tasks` map holds one policy per task id; the
trial passes the task id in `context['task_id']`). A policy is a list of steps; each step is a
command to run (`run`) or a tool to call (`tool` + `args`), optionally guarded by `when`:

    tasks:
      build-report:
        steps:
        - {id: look, run: "ls -la /app"}
        - {id: build, run: "sleep 6; make -C /app", sets: {built: "yes"}}
        - {id: check, when: {prompt: "(?i)verif"}, run: "make -C /app test"}
        - {id: fix, when: {output: "FAILED"}, run: "...", sets: {answer: good}}
        - {id: convention, when: {prompt: "ISO 8601"}, run: "good", sets: {date: iso},
           else: {run: "bad", sets: {date: us}}}
        pass_if: {answer: good}

`when` keys, all of which must hold: `prompt` (regex over the system prompt, every user message
and what answered a finish call: the task template, a verification challenge), `output` /
`no_output` (regex over the tool results still in the conversation: a truncated or dropped output
hides its lines), `tool` (a tool of that name is offered). `sets` and `pass_if` are for the judge
(meta_bench.check), not this model.

What the harness decides, and nothing else (the model is a pure function of the conversation and
the tools offered, so a sub-agent's fresh conversation replays the policy from its start):

- each turn it takes the first step not yet done whose `when` holds (else its `else`), and calls
  it; a step is done once called, unless the call came back "Unknown tool" (it asks again);
- `run` goes to the shell tool: an offered tool with a command-like string parameter whose
  description does not tell it not to run commands, preferring `bash`, then `shell`; with none, it
  delegates the task to an offered agent tool (one with a `task` parameter) once, and failing that
  keeps asking for a shell tool that does not exist (`bash`, or `shell` when bash is there but
  its description forbids running commands);
- `tool` steps call that tool when offered, else run their `run` (if any) through the shell tool,
  else ask for it anyway;
- with nothing left to do it calls `finish` (a tool named finish/submit/done), or says "Done.".

Tool call ids are `mb-<step id>-<n>` (`<step id>_else` when the `else` ran; `mb-delegate-<n>`
for delegation), so a judge wrapped around the tool runner knows which step each call and result
belongs to.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from metaopt.core.errors import ModelConfigError
from metaopt.task_agent.messages import Message, TextPart, ToolCallPart, ToolResultPart, ToolSpec
from metaopt.task_agent.models.fake_base import FakeModel

COMMAND_PARAMS = ("command", "cmd", "script", "code")
SHELL_NAMES = ("bash", "shell", "sh", "terminal")
FINISH_NAMES = ("finish", "submit", "done")
DENY = re.compile(r"(?i)read[- ]only|\b(do not|don't|never|cannot|can't|must not)\b[^.]{0,40}\b(run|execute)\b")
STEP_KEYS = {"id", "run", "tool", "args", "when", "else", "sets"}
WHEN_KEYS = {"prompt", "output", "no_output", "tool"}
UNKNOWN = "Unknown tool"


def load_policies(path: str | Path) -> dict[str, dict[str, Any]]:
    """Task id -> policy from a YAML file with a `tasks` mapping. ModelConfigError when malformed."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ModelConfigError(f"cannot read replay policy {path}: {e}") from None
    tasks = (data or {}).get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, dict) or not tasks:
        raise ModelConfigError(f"replay policy {path}: needs a `tasks` mapping of task id -> policy")
    for tid, policy in tasks.items():
        check_policy(policy, f"{path}: tasks.{tid}")
    return tasks


def check_policy(policy: Any, where: str) -> None:
    steps = policy.get("steps") if isinstance(policy, dict) else None
    if not isinstance(steps, list) or not steps:
        raise ModelConfigError(f"{where}: needs a non-empty `steps` list")
    seen: set[str] = set()
    for i, s in enumerate(steps):
        for step in (s, (s or {}).get("else") if isinstance(s, dict) else None):
            if step is None:
                continue
            if not isinstance(step, dict) or set(step) - STEP_KEYS or not ("run" in step or "tool" in step):
                raise ModelConfigError(f"{where}.steps[{i}]: a mapping with run or tool (keys: {sorted(STEP_KEYS)})")
            if set(step.get("when") or {}) - WHEN_KEYS:
                raise ModelConfigError(f"{where}.steps[{i}].when: keys are {sorted(WHEN_KEYS)}")
        sid = str(s.get("id") or i)
        if sid in seen or "-" in sid or sid.endswith("_else"):
            raise ModelConfigError(f"{where}.steps[{i}].id: ids are unique and have no '-' ({sid!r})")
        seen.add(sid)


def step_of(call_id: str) -> str | None:
    """The step id a replay tool call id belongs to (None for delegation or a foreign id)."""
    parts = call_id.split("-")
    return parts[1] if len(parts) == 3 and parts[0] == "mb" and parts[1] != "delegate" else None


class ReplayModel(FakeModel):
    def __init__(self, path: str, context: dict[str, Any] | None) -> None:
        super().__init__()
        self.name = f"fake/replay:{path}"
        task_id = (context or {}).get("task_id")
        policies = load_policies(path)
        if task_id not in policies:
            raise ModelConfigError(f"replay policy {path} has no task {task_id!r} (tasks: {', '.join(policies)})")
        self.task_id, self.steps = task_id, [dict(s, id=str(s.get("id") or i)) for i, s in
                                             enumerate(policies[task_id]["steps"])]

    def respond(self, messages: list[Message], tools: list[ToolSpec]) -> list[Any]:
        offered = {t.name: t for t in tools}
        calls = {p.id: p for m in messages if m.role == "assistant" for p in m.tool_calls}
        results = [p for m in messages if m.role == "tool" for p in m.parts if isinstance(p, ToolResultPart)]
        asked_again = {r.id for r in results if r.is_error and r.response.startswith(UNKNOWN)}
        done = {(step_of(cid) or "").removesuffix("_else") for cid in calls if cid not in asked_again}
        # what the harness tells it: prompts, the task, and what answered its finish (a verification challenge)
        prompt = "\n".join([m.text for m in messages if m.role in ("system", "user")]
                           + [r.response for r in results if r.id.startswith("mb-finish-")])
        output = "\n".join(r.response for r in results if not r.id.startswith("mb-finish-"))
        shell = _shell_tool(tools)
        if shell is None and any(c.startswith("mb-delegate-") for c in calls):
            return self._finish(offered)
        for step in self.steps:
            if step["id"] in done:
                continue
            chosen = step if _holds(step.get("when"), prompt, output, offered) else step.get("else")
            if chosen is None:
                continue
            sid = step["id"] if chosen is step else f"{step['id']}_else"
            return [self._act(sid, chosen, shell, offered, messages)]
        return self._finish(offered)

    def _act(self, sid: str, step: dict[str, Any], shell: ToolSpec | None, offered: dict[str, ToolSpec],
             messages: list[Message]) -> ToolCallPart:
        n = self._ids + 1
        if "tool" in step and (step["tool"] in offered or "run" not in step):
            return self._call(step["tool"], dict(step.get("args") or {}), f"mb-{sid}-{n}")
        if shell is None:
            agent = next((t for t in offered.values() if "task" in t.parameters.get("properties", {})), None)
            if agent is not None:
                task = next((m.text for m in messages if m.role == "user"), "")
                return self._call(agent.name, {"task": task}, f"mb-delegate-{n}")
            wanted = next((n for n in SHELL_NAMES if n not in offered), SHELL_NAMES[0])
            return self._call(wanted, {"command": step["run"]}, f"mb-{sid}-{n}")
        return self._call(shell.name, {_command_param(shell): step["run"]}, f"mb-{sid}-{n}")

    def _finish(self, offered: dict[str, ToolSpec]) -> list[Any]:
        name = next((n for n in FINISH_NAMES if n in offered), None)
        if name is None:
            return [TextPart(content="Done.")]
        return [self._call(name, {"summary": f"Replayed the policy of {self.task_id}."}, f"mb-finish-{self._ids + 1}")]


def _holds(when: dict[str, str] | None, prompt: str, output: str, offered: dict[str, ToolSpec]) -> bool:
    when = when or {}
    return ((not when.get("prompt") or re.search(when["prompt"], prompt) is not None)
            and (not when.get("output") or re.search(when["output"], output) is not None)
            and (not when.get("no_output") or re.search(when["no_output"], output) is None)
            and (not when.get("tool") or when["tool"] in offered))


def _command_param(tool: ToolSpec) -> str:
    props = tool.parameters.get("properties", {})
    return next((p for p in COMMAND_PARAMS if props.get(p, {}).get("type") == "string"), "")


def _shell_tool(tools: list[ToolSpec]) -> ToolSpec | None:
    """The tool it runs commands with: a command-like string parameter, not told off in its
    description; bash first, then shell, sh, terminal, then the first other one."""
    usable = [t for t in tools if _command_param(t) and not DENY.search(t.description)]
    rank = {n: i for i, n in enumerate(SHELL_NAMES)}
    return min(usable, key=lambda t: rank.get(t.name, len(rank)), default=None)
