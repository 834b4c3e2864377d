"""Harness tools outside metaopt: standard library only, copied verbatim into every code export.

A harness's shell and python tools run through an Executor the user supplies (their own
container, VM or machine): one method, `run(command, timeout, fresh, user) -> Result`. The
rendering of commands, argument checks, truncation and output layout are the same as metaopt's
task agent (task_agent/tools.py), so an exported agent sees the same tool outputs:
stdout, then stderr after a `[stderr]` line, cut to the tool's output_limit (head and tail
around `[... N characters omitted ...]`), then `[exit code N]` or `[command timed out after N s]`;
`[no output]` when there is nothing.

`LocalExecutor` runs commands with bash on this machine in one directory and carries the working
directory and exported variables between persistent calls (shell functions and unexported
variables do not carry over). Use it only where running the model's commands locally is safe.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Protocol

TOOL_DIR = "/tmp/.metaopt_tools"
_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(!raw)?\}|[{}]")
_PY_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
                             "array": list, "object": dict, "null": type(None)}


@dataclass(frozen=True)
class Result:
    """What one command did."""

    stdout: str
    stderr: str
    exit_code: int  # 124 when killed for running past its timeout
    timed_out: bool = False


class Executor(Protocol):
    """Runs the harness's shell commands where the agent works. `fresh=False` runs in the
    agent's persistent session (cwd and environment carry over); `fresh=True` in a new process,
    as `user` when given. Must never raise for a failing command: that is a Result."""

    def run(self, command: str, *, timeout: float, fresh: bool = False, user: str | None = None) -> Result: ...


def truncate_middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head, omitted = limit // 2, len(text) - limit
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - (limit - head):]}"


def render_command(tool: dict[str, Any], arguments: dict[str, Any]) -> str:
    """The shell command of a shell tool: `{p}` shell-quoted, `{p!raw}` as is, `{{ }}` braces."""
    props = tool.get("parameters", {}).get("properties", {})
    out, pos, template = [], 0, tool.get("template") or ""
    for m in _TOKEN.finditer(template):
        out.append(template[pos:m.start()])
        pos = m.end()
        if not m.group(1):
            out.append(m.group(0)[0])
            continue
        value = arguments.get(m.group(1), props.get(m.group(1), {}).get("default"))
        text = "" if value is None else value if isinstance(value, str) else json.dumps(value)
        out.append(text if m.group(2) else shlex.quote(text))
    out.append(template[pos:])
    return "".join(out)


def check_arguments(schema: dict[str, Any], args: Any, where: str = "arguments") -> str | None:
    """The first way `args` breaks `schema`, as a sentence for the model; None if it conforms."""
    types = schema.get("type")
    types = types if isinstance(types, list) else [types] if types else []
    if types and not any(_is_type(args, t) for t in types):
        return f"{where} must be {' or '.join(types)}, got {_json_type(args)} {_short(args)}"
    if "enum" in schema and args not in schema["enum"]:
        return f"{where} must be one of {json.dumps(schema['enum'])}, got {_short(args)}"
    if isinstance(args, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(args):
            if problem := check_arguments(schema["items"], item, f"{where}[{i}]"):
                return problem
    if isinstance(args, dict):
        props = schema.get("properties", {})
        if missing := [k for k in schema.get("required", []) if k not in args]:
            return f"missing required argument {', '.join(map(repr, missing))}"
        extra = [k for k in args if k not in props]
        if extra and schema.get("additionalProperties") is False:
            return f"unknown argument {', '.join(map(repr, extra))}"
        for key, value in args.items():
            sub = f"{key!r}" if where == "arguments" else f"{where}.{key}"
            if key in props and (problem := check_arguments(props[key], value, sub)):
                return problem
    return None


def run_tool(tool: dict[str, Any], arguments: dict[str, Any], executor: Executor,
             deadline: float | None = None) -> tuple[str, bool]:
    """Run a shell or python tool; returns (output for the model, is_error). Never raises for
    what the model did."""
    if problem := check_arguments(tool.get("parameters", {}), arguments):
        return f"Invalid arguments for {tool['name']}: {problem}. Expected {_signature(tool)}.", True
    timeout = float(tool.get("timeout_s", 60.0))
    if deadline is not None:
        timeout = min(timeout, deadline - time.monotonic())
        if timeout <= 0:
            return f"[{tool['name']} not run: the time limit for this task is reached]", True
    if tool["kind"] == "shell":
        command = render_command(tool, arguments)
    else:
        command = python_command(tool, arguments)
    fresh = tool.get("session", "persistent") == "fresh"
    result = executor.run(command, timeout=timeout, fresh=fresh, user=tool.get("user") if fresh else None)
    return format_output(result, int(tool.get("output_limit", 10_000)), timeout)


def python_command(tool: dict[str, Any], arguments: dict[str, Any]) -> str:
    """A shell command that writes the tool's script and runs it with the arguments as one line
    of JSON on stdin (ASCII-escaped JSON holds no newline, so it cannot end the heredoc). A
    subshell, so `exit` never ends a persistent session."""
    script = tool.get("script") or ""
    path = f"{TOOL_DIR}/{tool['name']}-{hashlib.sha256(script.encode()).hexdigest()[:12]}.py"
    encoded = base64.b64encode(script.encode()).decode()
    end = f"METAOPT_ARGS_{secrets.token_hex(6)}"
    payload = json.dumps(arguments, ensure_ascii=True)
    return (f"( mkdir -p {TOOL_DIR} && printf %s {encoded} | base64 -d > {path} || exit 199\n"
            f"python3 {path} <<'{end}'\n{payload}\n{end}\n)")


def format_output(result: Result, limit: int, timeout: float) -> tuple[str, bool]:
    body = result.stdout
    if result.stderr:
        sep = "" if not body or body.endswith("\n") else "\n"
        body = f"{body}{sep}[stderr]\n{result.stderr}"
    shown = truncate_middle(body, limit)
    notes = []
    if result.timed_out:
        notes.append(f"[command timed out after {round(timeout, 1):g} s]")
    elif result.exit_code != 0:
        notes.append(f"[exit code {result.exit_code}]")
    if not shown and not notes:
        shown = "[no output]"
    text = "\n".join(([shown.rstrip("\n")] if shown else []) + notes)
    return text, result.exit_code != 0 or result.timed_out


def _signature(tool: dict[str, Any]) -> str:
    params = tool.get("parameters", {})
    required = set(params.get("required", []))
    fields = [f"{k}: {v.get('type', 'any')}{'' if k in required else ' (optional)'}"
              for k, v in params.get("properties", {}).items()]
    return f"{tool['name']}({', '.join(fields)})"


def _is_type(value: Any, t: str) -> bool:
    if isinstance(value, bool):
        return t == "boolean"
    return isinstance(value, _PY_TYPES.get(t, ()))


def _json_type(value: Any) -> str:
    return next((t for t in ("boolean", "integer", "number", "string", "array", "object", "null")
                 if _is_type(value, t)), type(value).__name__)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# -- persistent sessions over one-shot execution --------------------------------------------

def stateful_command(command: str, state_dir: str) -> str:
    """Wrap `command` so cwd and exported variables saved by the previous call are restored
    first and saved again afterwards, for executors that only run one-shot processes."""
    return (f"cd \"$(cat {state_dir}/cwd 2>/dev/null || pwd)\" 2>/dev/null; "
            f". {state_dir}/env 2>/dev/null\n"
            f"{command}\n__rc=$?; mkdir -p {state_dir}; pwd > {state_dir}/cwd; "
            f"export -p > {state_dir}/env 2>/dev/null; exit $__rc")


class LocalExecutor:
    """Runs commands with bash in `workdir` on this machine (see the module docstring)."""

    def __init__(self, workdir: str | None = None) -> None:
        self.workdir = workdir or tempfile.mkdtemp(prefix="harness-")
        self.state = tempfile.mkdtemp(prefix="harness-session-")

    def run(self, command: str, *, timeout: float, fresh: bool = False, user: str | None = None) -> Result:
        script = command if fresh else stateful_command(command, self.state)
        proc = subprocess.Popen(["bash", "-c", script], cwd=self.workdir, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=True, env=os.environ.copy())
        try:
            out, err = proc.communicate(timeout=timeout)
            return Result(out, err, proc.returncode)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole process group: background jobs too
            out, err = proc.communicate()
            return Result(out, err, 124, timed_out=True)
