"""Executing a harness's shell and python tools inside a sandbox.

`run_tool` never raises for anything the model did (bad arguments, failing or hanging
commands): those come back as a ToolOutcome the model can read and act on. It raises ValueError
for a caller mistake (a finish/agent tool, a persistent tool without a shell) and lets
SandboxError through when the sandbox itself fails.

What the model sees: stdout, then stderr after a `[stderr]` line, cut to tool.output_limit
characters (head and tail around `[... N characters omitted ...]`), then `[exit code N]` for a
non-zero exit or `[command timed out after N s]`; `[no output]` when there is nothing.

Python tools: the script is written once per sandbox to /tmp/.metaopt_tools/<name>-<hash>.py
(again if the agent deleted it) and run with `python3`. The arguments reach its stdin as one
line of JSON in a quoted heredoc inside the command: ASCII-escaped JSON holds no newline, so it
can never end the heredoc. The persistent shell reads commands from a stream, so size does not
matter there; a fresh exec carries its command in argv (128 KiB per string), so large arguments
go through a file written with Sandbox.write_file instead.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shlex
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from metaopt.sandbox.base import ExecResult, Sandbox, Shell
from metaopt.task_agent.templates import parse_template
from metaopt.task_agent.truncate import truncate_middle

if TYPE_CHECKING:
    from metaopt.task_agent.harness import ToolDef

TOOL_DIR = "/tmp/.metaopt_tools"
_MISSING_SCRIPT = 199  # exit status meaning "the script file is gone": rewrite it, run again
_ARGV_SAFE = 100_000  # below the kernel's 128 KiB limit on one argv string
_PY_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
                             "array": list, "object": dict, "null": type(None)}
_written: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one tool call. `output` is what the model sees (already truncated)."""

    output: str
    is_error: bool  # invalid arguments, a non-zero exit, a timeout, or no time left
    exit_code: int | None = None  # None when nothing ran
    timed_out: bool = False
    truncated: bool = False
    full_length: int = 0  # characters of output before truncation (notes excluded)
    duration_s: float = 0.0


def check_arguments(schema: dict[str, Any], args: Any, where: str = "arguments") -> str | None:
    """The first way `args` breaks `schema` (type, enum, required, items, properties,
    additionalProperties: false), as a sentence for the model; None if it conforms."""
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


def render_command(tool: ToolDef, arguments: dict[str, Any]) -> str:
    """The shell command for `arguments` (already checked). Absent arguments take the schema's
    `default`, else the empty string; non-strings are inserted as JSON (true, 3, [1,2])."""
    props = tool.parameters.get("properties", {})
    out = []
    for part in parse_template(tool.template or ""):
        if isinstance(part, str):
            out.append(part)
            continue
        name, raw = part
        value = arguments.get(name, props.get(name, {}).get("default"))
        text = "" if value is None else value if isinstance(value, str) else json.dumps(value)
        out.append(text if raw else shlex.quote(text))
    return "".join(out)


def run_tool(tool: ToolDef, arguments: dict[str, Any], sandbox: Sandbox, shell: Shell | None,
             *, deadline: float | None = None) -> ToolOutcome:
    """Run a shell or python tool. The timeout is tool.timeout_s, cut to what is left before
    `deadline` (a time.monotonic() value; None = no task limit). Persistent tools run in
    `shell`; fresh ones in a new exec as tool.user. See the module docstring for what raises."""
    if tool.kind not in ("shell", "python"):
        raise ValueError(f"{tool.kind} tools are run by the agent loop, not run_tool ({tool.name})")
    if tool.session == "persistent" and shell is None:
        raise ValueError(f"tool {tool.name} runs in the persistent shell: pass one")
    if problem := check_arguments(tool.parameters, arguments):
        text = f"Invalid arguments for {tool.name}: {problem}. Expected {_signature(tool)}."
        return ToolOutcome(text, is_error=True, full_length=len(text))
    timeout = tool.timeout_s
    if deadline is not None:
        timeout = min(timeout, deadline - time.monotonic())
        if timeout <= 0:
            text = f"[{tool.name} not run: the time limit for this task is reached]"
            return ToolOutcome(text, is_error=True, timed_out=True, full_length=len(text))
    t0 = time.monotonic()
    if tool.kind == "shell":
        result = _execute(render_command(tool, arguments), tool, sandbox, shell, timeout)
    else:
        result = _run_python(tool, arguments, sandbox, shell, timeout)
    return _outcome(result, tool, timeout, time.monotonic() - t0)


def _execute(command: str, tool: ToolDef, sandbox: Sandbox, shell: Shell | None,
             timeout: float) -> ExecResult:
    if tool.session == "persistent":
        assert shell is not None
        return shell.run(command, timeout=timeout)
    return sandbox.exec(command, timeout=timeout, user=tool.user)


def _run_python(tool: ToolDef, arguments: dict[str, Any], sandbox: Sandbox, shell: Shell | None,
                timeout: float) -> ExecResult:
    script = tool.script or ""
    path = f"{TOOL_DIR}/{tool.name}-{hashlib.sha256(script.encode()).hexdigest()[:12]}.py"
    payload = json.dumps(arguments, ensure_ascii=True)  # one line, ASCII: cannot end the heredoc
    args_file = None
    if tool.session == "fresh" and len(payload) > _ARGV_SAFE:
        args_file = f"{TOOL_DIR}/args-{secrets.token_hex(8)}.json"
        sandbox.write_file(args_file, payload, mode=0o644)
        stdin = f"< {args_file}; rc=$?; rm -f {args_file}; exit $rc"
    else:
        end = f"METAOPT_ARGS_{secrets.token_hex(6)}"
        stdin = f"<<'{end}'\n{payload}\n{end}\n"
    # A subshell, so `exit` never ends the persistent shell (and with it the agent's cwd/env).
    command = f"( [ -r {path} ] || exit {_MISSING_SCRIPT}\npython3 {path} {stdin})"
    for attempt in (0, 1):
        _ensure_script(sandbox, path, script, force=attempt == 1)
        result = _execute(command, tool, sandbox, shell, timeout)
        if result.exit_code != _MISSING_SCRIPT or result.stdout or result.stderr:
            break  # the agent may have wiped /tmp: only then write the script again
    return result


def _ensure_script(sandbox: Sandbox, path: str, script: str, *, force: bool) -> None:
    try:
        seen = _written.setdefault(sandbox, set())
    except TypeError:  # not weak-referenceable: write every time
        seen = set()
    if force or path not in seen:
        sandbox.write_file(path, script, mode=0o644)
        seen.add(path)


def _outcome(result: ExecResult, tool: ToolDef, timeout: float, duration: float) -> ToolOutcome:
    body = result.stdout
    if result.stderr:
        sep = "" if not body or body.endswith("\n") else "\n"
        body = f"{body}{sep}[stderr]\n{result.stderr}"
    full_length = len(body)
    shown, truncated = truncate_middle(body, tool.output_limit)
    notes = []
    if result.timed_out:
        notes.append(f"[command timed out after {round(timeout, 1):g} s]")
    elif result.exit_code != 0:
        notes.append(f"[exit code {result.exit_code}]")
    if not shown and not notes:
        shown = "[no output]"
    text = "\n".join(([shown.rstrip("\n")] if shown else []) + notes)
    return ToolOutcome(text, is_error=not result.ok, exit_code=result.exit_code,
                       timed_out=result.timed_out, truncated=truncated, full_length=full_length,
                       duration_s=duration)


def _signature(tool: ToolDef) -> str:
    props = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", []))
    fields = [f"{k}: {v.get('type', 'any')}{'' if k in required else ' (optional)'}"
              for k, v in props.items()]
    return f"{tool.name}({', '.join(fields)})"


def _is_type(value: Any, t: str) -> bool:
    if isinstance(value, bool):  # a Python bool is an int, but JSON true is no number
        return t == "boolean"
    return isinstance(value, _PY_TYPES.get(t, ()))


def _json_type(value: Any) -> str:
    for t in ("boolean", "integer", "number", "string", "array", "object", "null"):
        if _is_type(value, t):
            return t
    return type(value).__name__


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
