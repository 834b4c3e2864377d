"""Running harness tools: argument checks, template rendering and truncation (pure), then shell
and python tools in a real Docker sandbox (marked `docker`, skipped when the daemon or the image
is missing)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metaopt.sandbox.base import SandboxSpec
from metaopt.task_agent.harness import ToolDef
from metaopt.task_agent.harness_io import load_harness
from metaopt.task_agent.tools import check_arguments, render_command, run_tool
from metaopt.task_agent.truncate import truncate_middle

HARNESSES = Path(__file__).resolve().parent.parent / "metaopt" / "harnesses"
TRICKY = "it's \"quoted\" $HOME `id` $(echo no) \\ back\nline two ünïcødé ✓\n\ttab; rm -rf /tmp/x &&\n"


def _shell_tool(template: str, **over: Any) -> ToolDef:
    params = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return ToolDef(**{"name": "t", "kind": "shell", "description": "d", "parameters": params,
                      "template": template, **over})


def _python_tool(script: str, **over: Any) -> ToolDef:
    params = {"type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}}}
    return ToolDef(**{"name": "py", "kind": "python", "description": "d", "parameters": params,
                      "script": script, **over})


BASH = _shell_tool("{text!raw}", name="bash")
ECHO_ARGS = "import json, sys\nprint(json.dumps(json.load(sys.stdin), sort_keys=True))\n"

# ---------------------------------------------------------------------------- pure


def test_truncate_middle_keeps_head_and_tail() -> None:
    assert truncate_middle("short", 10) == ("short", False)
    text = "H" * 50 + "m" * 900 + "T" * 50
    out, cut = truncate_middle(text, 100)
    assert cut and out == "H" * 50 + "\n[... 900 characters omitted ...]\n" + "T" * 50
    assert truncate_middle("abc", 0) == ("\n[... 3 characters omitted ...]\n", True)


def test_check_arguments_messages() -> None:
    schema = {"type": "object", "required": ["path"], "additionalProperties": False,
              "properties": {"path": {"type": "string"}, "n": {"type": "integer"},
                             "mode": {"enum": ["r", "w"]},
                             "tags": {"type": "array", "items": {"type": "string"}}}}
    assert check_arguments(schema, {"path": "x", "n": 3, "tags": ["a"]}) is None
    assert check_arguments(schema, {}) == "missing required argument 'path'"
    assert check_arguments(schema, {"path": 3}) == "'path' must be string, got integer 3"
    assert check_arguments(schema, {"path": "x", "n": True}) == "'n' must be integer, got boolean true"
    assert check_arguments(schema, {"path": "x", "n": 1.5}).startswith("'n' must be integer")
    assert check_arguments(schema, {"path": "x", "mode": "a"}) == "'mode' must be one of [\"r\", \"w\"], got \"a\""
    assert check_arguments(schema, {"path": "x", "tags": ["a", 2]}) == "'tags'[1] must be string, got integer 2"
    assert check_arguments(schema, {"path": "x", "bogus": 1}) == "unknown argument 'bogus'"


def test_render_command_quotes_defaults_and_raw() -> None:
    params = {"type": "object", "properties": {"a": {"type": "string"}, "n": {"type": "integer", "default": 5},
                                               "flag": {"type": "boolean"}, "opt": {"type": "string"}}}
    tool = ToolDef(name="r", kind="shell", description="d", parameters=params,
                   template="cmd {a} {n} {flag} {opt} ${{X}} {a!raw}")
    assert render_command(tool, {"a": "it's", "flag": True}) == "cmd 'it'\"'\"'s' 5 true '' ${X} it's"


def test_run_tool_without_running_anything() -> None:
    nothing = object()  # any use of the sandbox or shell would raise AttributeError
    out = run_tool(BASH, {"txt": "ls"}, nothing, nothing)  # type: ignore[arg-type]
    assert out.is_error and out.exit_code is None
    assert out.output == ("Invalid arguments for bash: missing required argument 'text'. "
                          "Expected bash(text: string).")
    late = run_tool(BASH, {"text": "ls"}, nothing, nothing, deadline=time.monotonic() - 1)  # type: ignore[arg-type]
    assert late.is_error and late.timed_out and "time limit" in late.output
    finish = ToolDef(name="finish", kind="finish", description="d")
    with pytest.raises(ValueError, match="agent loop"):
        run_tool(finish, {}, nothing, nothing)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="persistent shell"):
        run_tool(BASH, {"text": "ls"}, nothing, None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- docker


@pytest.fixture(scope="module")
def sandbox(docker_backend: Any, test_image: str) -> Iterator[Any]:
    run_id = f"test-tools-{secrets.token_hex(4)}"
    try:
        with docker_backend.start(SandboxSpec(image=test_image, workdir="/app"), run_id=run_id) as sbx:
            yield sbx
    finally:
        docker_backend.prune(run_id)


@pytest.fixture
def shell(sandbox: Any) -> Iterator[Any]:
    sh = sandbox.shell()
    yield sh
    sh.close()


@pytest.mark.usefixtures("docker_image")
def test_bash_quotes_newlines_and_heredocs(sandbox: Any, shell: Any) -> None:
    command = "cat > /tmp/h.txt <<'EOF'\nsingle ' double \" $HOME\nEOF\ncat /tmp/h.txt; echo \"a'b\""
    out = run_tool(BASH, {"text": command}, sandbox, shell)
    assert (out.output, out.is_error, out.exit_code) == ("single ' double \" $HOME\na'b", False, 0)
    quoted = run_tool(_shell_tool("printf '%s' {text}"), {"text": TRICKY}, sandbox, shell)
    assert quoted.output == TRICKY.rstrip("\n")  # outcome text drops trailing newlines only
    assert quoted.full_length == len(TRICKY)


@pytest.mark.usefixtures("docker_image")
def test_persistent_session_keeps_cwd_and_env(sandbox: Any, shell: Any) -> None:
    run_tool(BASH, {"text": "mkdir -p /tmp/w && cd /tmp/w && export GREETING=hi"}, sandbox, shell)
    assert run_tool(BASH, {"text": "pwd; echo $GREETING"}, sandbox, shell).output == "/tmp/w\nhi"
    fresh = _shell_tool("{text!raw}", session="fresh")
    assert run_tool(fresh, {"text": "pwd; echo ${GREETING:-unset}"}, sandbox, shell).output == "/app\nunset"


@pytest.mark.usefixtures("docker_image")
def test_stderr_and_exit_code_are_labelled(sandbox: Any, shell: Any) -> None:
    out = run_tool(BASH, {"text": "echo out; echo err >&2; (exit 3)"}, sandbox, shell)
    assert out.output == "out\n[stderr]\nerr\n[exit code 3]"
    assert out.is_error and out.exit_code == 3
    assert run_tool(BASH, {"text": "true"}, sandbox, shell).output == "[no output]"


@pytest.mark.usefixtures("docker_image")
def test_timeout_note_and_next_call_works(sandbox: Any, shell: Any) -> None:
    quick = _shell_tool("{text!raw}", timeout_s=1)
    out = run_tool(quick, {"text": "echo started; sleep 30"}, sandbox, shell)
    assert out.timed_out and out.is_error and out.duration_s < 10
    assert out.output.startswith("started\n") and out.output.endswith("\n[command timed out after 1 s]")
    assert run_tool(quick, {"text": "echo alive"}, sandbox, shell).output == "alive"
    # the task deadline cuts a long tool timeout short
    t0 = time.monotonic()
    late = run_tool(BASH, {"text": "sleep 30"}, sandbox, shell, deadline=t0 + 1.5)
    assert late.timed_out and time.monotonic() - t0 < 10
    assert "[command timed out after 1.5 s]" in late.output


@pytest.mark.usefixtures("docker_image")
def test_truncation_keeps_head_and_tail(sandbox: Any, shell: Any) -> None:
    tool = _shell_tool("{text!raw}", output_limit=100)
    out = run_tool(tool, {"text": "echo BEGIN; seq 1 2000; echo END"}, sandbox, shell)
    assert out.truncated and out.full_length > 8000
    assert out.output.startswith("BEGIN\n1\n2\n") and out.output.endswith("2000\nEND")
    assert f"[... {out.full_length - 100} characters omitted ...]" in out.output


@pytest.mark.usefixtures("docker_image")
def test_baseline_write_and_read_file_round_trip(sandbox: Any, shell: Any) -> None:
    tools = {t.name: t for t in load_harness(HARNESSES / "baseline").tools}
    run_tool(tools["bash"], {"command": "mkdir -p /tmp/rw && cd /tmp/rw"}, sandbox, shell)
    wrote = run_tool(tools["write_file"], {"path": "deep/er/f.txt", "content": TRICKY}, sandbox, shell)
    size = len(TRICKY.encode())
    assert not wrote.is_error and wrote.output == f"wrote {size} bytes to deep/er/f.txt"
    assert sandbox.read_file("/tmp/rw/deep/er/f.txt") == TRICKY.encode()  # exact, trailing newline too
    read = run_tool(tools["read_file"], {"path": "/tmp/rw/deep/er/f.txt"}, sandbox, shell)
    assert read.output == TRICKY.rstrip("\n") and not read.is_error
    run_tool(tools["write_file"], {"path": "n.txt", "content": "".join(f"{i}\n" for i in range(1, 1001))},
             sandbox, shell)
    part = run_tool(tools["read_file"], {"path": "n.txt", "start_line": 10, "end_line": 12}, sandbox, shell)
    assert part.output == "10\n11\n12\n\n[lines 10-12 of 1000; call read_file with start_line=13 to read on]"
    head = run_tool(tools["read_file"], {"path": "n.txt"}, sandbox, shell)
    assert head.output.endswith("500\n\n[lines 1-500 of 1000; call read_file with start_line=501 to read on]")
    missing = run_tool(tools["read_file"], {"path": "nope.txt"}, sandbox, shell)
    assert missing.is_error and "no such file: nope.txt" in missing.output
    bad = run_tool(tools["read_file"], {"path": "n.txt", "start_line": "ten"}, sandbox, shell)
    assert bad.is_error and "'start_line' must be integer" in bad.output


@pytest.mark.usefixtures("docker_image")
def test_python_tool_receives_json_args(sandbox: Any, shell: Any) -> None:
    args = {"text": TRICKY + "EOF\nMETAOPT_ARGS_x\n", "n": 7}
    for session in ("persistent", "fresh"):
        out = run_tool(_python_tool(ECHO_ARGS, session=session), args, sandbox, shell)
        assert not out.is_error, out.output
        assert json.loads(out.output) == args
    big = {"text": "x" * 300_000}  # fresh execs pass big arguments through a file, not argv
    out = run_tool(_python_tool(ECHO_ARGS, session="fresh", output_limit=10**6), big, sandbox, shell)
    assert json.loads(out.output) == big


@pytest.mark.usefixtures("docker_image")
def test_python_tool_cwd_errors_and_lost_script(sandbox: Any, shell: Any) -> None:
    run_tool(BASH, {"text": "cd /tmp"}, sandbox, shell)
    cwd = _python_tool("import os\nprint(os.getcwd())\n")
    assert run_tool(cwd, {}, sandbox, shell).output == "/tmp"  # persistent: the agent's cwd
    failing = _python_tool("import sys\nprint('partial')\nsys.exit('bad input')\n")
    out = run_tool(failing, {}, sandbox, shell)
    assert out.is_error and out.output == "partial\n[stderr]\nbad input\n[exit code 1]"
    run_tool(BASH, {"text": "rm -rf /tmp/.metaopt_tools"}, sandbox, shell)  # the agent wiped /tmp
    assert run_tool(cwd, {}, sandbox, shell).output == "/tmp"
    assert run_tool(BASH, {"text": "pwd"}, sandbox, shell).output == "/tmp"  # session intact
