"""`metaopt export`: every format is exported from a candidate of a real offline optimizer run and
replays the same scripted model as the in-tree TaskAgent (fake/script) with the same tool calls
and outputs. The in-tree reference runs in a Docker sandbox; the python export runs through the
real openai/anthropic SDKs against the local stand-in servers (tests/wire_servers.py) with an
executor over a second container; the inspect export runs under inspect_ai.eval (mockllm replaying
the script, sandbox "local"), the openai-agents export under Runner against the stand-in OpenAI
server with LocalExecutor. The claude-agent-sdk export cannot run here (Claude Code needs the
streaming Anthropic API): its options are checked against the harness and its tools replay the
script."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import time
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import wire_servers as ws
from _docker_fixtures import docker_backend, make_sandbox, metaopt, require_base_image, test_image, test_run_id  # noqa: F401
from _step_tasks import make_tasks
from task_agent.harness import Harness
from task_agent.harness_io import load_harness
from task_agent.loop import TaskAgent
from task_agent.models.fake import ScriptModel
from traces.store import Store

pytestmark = pytest.mark.docker

# Environment-independent commands, so the same outputs come back from a container and from a
# local temp dir: cwd and exported variables must carry over, stderr and exit codes, truncation
# (the candidate cuts output at 1000 characters), invalid arguments, two calls in one turn.
SCRIPT: list[dict[str, Any]] = [
    {"tool": "bash", "id": "c1", "arguments": {"command": "mkdir -p work && cd work && printf 'hello\\n' > a.txt && echo made"}},
    {"tool": "bash", "id": "c2", "arguments": {"command": "cat a.txt; export GREETING=hi"}},
    {"text": "Checking.", "tool": "bash", "id": "c3", "arguments": {"command": "echo $GREETING; ls missing-file"}},
    {"tool": "bash", "id": "c4", "arguments": {"command": "seq 1 3000"}},
    {"tool_calls": [{"tool": "bash", "id": "c5", "arguments": {"command": "echo one; exit 3"}},
                    {"tool": "bash", "id": "c6", "arguments": {}}]},
    {"tool": "finish", "id": "c7", "arguments": {"summary": "wrote work/a.txt"}},
]


@pytest.fixture(scope="module")
def candidate(tmp_path_factory) -> tuple[Path, str]:
    """(store, candidate id): a one-iteration offline optimizer run (about 15 s)."""
    require_base_image()
    root = tmp_path_factory.mktemp("opt")
    db = root / "r.duckdb"
    r = metaopt("run", "--benchmark", "terminalbench", "--dataset", str(make_tasks(root / "ds", 2, 1)),
                "--harness", "minimal", "--model", "fake/solution", "--meta-model", "heuristic", "--trials", "1",
                "--split", "0.34,0.33,0.33", "--max-iterations", "1", "--db", str(db), "--json", timeout=600)
    assert r.returncode == 0, r.stderr
    with Store(db, read_only=True) as s:
        [c] = s.rows("SELECT candidate_id FROM candidates WHERE iteration = 1")
    return db, c["candidate_id"]


def export(candidate: tuple[Path, str], fmt: str, out: Path, *extra: str) -> dict[str, Any]:
    db, cid = candidate
    r = metaopt("export", cid, "--db", str(db), "--format", fmt, "--out", str(out), "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def stored_harness(candidate: tuple[Path, str]) -> Harness:
    db, cid = candidate
    with Store(db, read_only=True) as s:
        [row] = s.rows("SELECT harness FROM candidates WHERE candidate_id = ?", [cid])
    return Harness.model_validate(json.loads(row["harness"]))


def transcript(messages: list[dict[str, Any]], with_errors: bool = True) -> list[tuple]:
    """(tool, arguments, output[, is_error]) per call, from OTel-shaped message dicts."""
    calls = {p["id"]: p for m in messages for p in m["parts"] if p["type"] == "tool_call"}
    out = []
    for m in messages:
        for p in m["parts"]:
            if p["type"] == "tool_call_response":
                c = calls[p["id"]]
                out.append((c["name"], c["arguments"], p["response"]) + ((bool(p.get("is_error")),) if with_errors else ()))
    return out


def reference(harness: Harness, sandbox, script: list[dict[str, Any]] = SCRIPT) -> list[tuple]:
    """What the in-tree TaskAgent does with fake/script on this harness."""
    ep = TaskAgent(harness, ScriptModel(script), sandbox, workdir="/tmp").run("Write work/a.txt.", time.monotonic() + 120)
    return transcript([m.to_otel() for m in ep.messages])


def load_package(out: Path, package: str):
    """Import the exported package under a unique name (several exports share package names)."""
    alias = f"exported_{package}_{len(sys.modules)}_{time.monotonic_ns()}"
    spec = importlib.util.spec_from_file_location(alias, out / package / "__init__.py",
                                                  submodule_search_locations=[str(out / package)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    spec.loader.exec_module(module)
    return module


class SandboxExecutor:
    """The exported package's Executor over a metaopt DockerSandbox (a user would wrap their own)."""

    def __init__(self, sandbox, result_type) -> None:
        self.sandbox, self.result, self.shell = sandbox, result_type, None

    def run(self, command: str, *, timeout: float, fresh: bool = False, user: str | None = None):
        if fresh:
            r = self.sandbox.exec(command, timeout=timeout, user=user, workdir="/tmp")
        else:
            self.shell = self.shell or self.sandbox.shell(workdir="/tmp")
            r = self.shell.run(command, timeout=timeout)
        return self.result(r.stdout, r.stderr, r.exit_code, r.timed_out)


def script_calls(step: dict[str, Any]) -> list[dict[str, Any]]:
    return ([step] if "tool" in step else []) + step.get("tool_calls", [])


def openai_replies(server: ws.WireServer, script: list[dict[str, Any]]) -> None:
    for step in script:
        calls = [ws.openai_tool_call(c["id"], c["tool"], json.dumps(c.get("arguments", {}))) for c in script_calls(step)]
        server.reply(ws.OPENAI_PATH, ws.openai_completion(step.get("text"), tool_calls=calls,
                                                          finish_reason="tool_calls" if calls else "stop"))


def anthropic_replies(server: ws.WireServer, script: list[dict[str, Any]]) -> None:
    for step in script:
        blocks = ([ws.text(step["text"])] if "text" in step else []) + [
            ws.tool_use(c["id"], c["tool"], c.get("arguments", {})) for c in script_calls(step)]
        server.reply(ws.ANTHROPIC_PATH, ws.anthropic_message(blocks, stop_reason="tool_use"))


# -- harness -------------------------------------------------------------------------------------

def test_harness_export_is_the_candidate_with_its_history(candidate, tmp_path):
    out = tmp_path / "h"
    export(candidate, "harness", out)
    assert load_harness(out) == stored_harness(candidate)
    text = (out / "README.md").read_text()
    db, cid = candidate
    assert cid in text and cid.split("/")[0] in text and "max_turns 8 -> 16" in text
    assert "| validation | 1 |" in text and "Lineage" in text and f"{cid.split('/')[0]}/c0" in text


# -- python --------------------------------------------------------------------------------------

@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_python_export_replays_the_script_like_the_task_agent(candidate, tmp_path, make_sandbox, provider):
    info = export(candidate, "python", tmp_path / "py")
    pkg = load_package(tmp_path / "py", info["package"])
    want = reference(stored_harness(candidate), make_sandbox())
    with ws.WireServer() as server:
        if provider == "openai":
            openai_replies(server, SCRIPT)
            model = pkg.OpenAIModel("gpt-5-mini", client=openai.OpenAI(api_key="k", base_url=server.openai_url, max_retries=0))
        else:
            anthropic_replies(server, SCRIPT)
            model = pkg.AnthropicModel("claude-export-test", client=anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0))
        ep = pkg.HarnessAgent(model, SandboxExecutor(make_sandbox(), pkg.Result)).run("Write work/a.txt.")
    assert ep.outcome == "finished" and ep.summary == "wrote work/a.txt"
    got = transcript(ep.messages)
    assert got == want
    assert "characters omitted ...]" in got[3][2] and got[2][3] and "[exit code 2]" in got[2][2]
    assert got[5][2].startswith("Invalid arguments for bash: missing required argument 'command'")


def test_python_export_local_executor_and_command_line(candidate, tmp_path):
    info = export(candidate, "python", tmp_path / "py")
    pkg = load_package(tmp_path / "py", info["package"])
    ex = pkg.LocalExecutor(str(tmp_path / "w"))
    (tmp_path / "w").mkdir()
    harness = pkg.load_harness()
    bash = next(t for t in harness["tools"] if t["name"] == "bash")
    outputs = [pkg.harness_runtime.run_tool(bash, {"command": c}, ex) for c in ("cd /; export X=1", "pwd; echo $X")]
    outputs.append(pkg.harness_runtime.run_tool({**bash, "timeout_s": 1}, {"command": "echo start; sleep 30"}, ex))
    assert outputs[1] == ("/\n1", False)
    assert outputs[2] == ("start\n[command timed out after 1 s]", True)
    r = __import__("subprocess").run([sys.executable, "-m", info["package"], "--help"], cwd=tmp_path / "py",
                                                capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--model" in r.stdout, r.stderr


def test_exports_never_hold_api_keys(candidate, tmp_path, monkeypatch):
    from meta_agent.export import FORMATS, export as export_lib

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-0001")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-0002")
    db, cid = candidate
    for fmt in FORMATS:
        result = export_lib(cid, fmt, tmp_path / fmt, db=db)
        files = [tmp_path / fmt / f for f in result.files]
        assert files and not any("secret-000" in p.read_text() for p in files), fmt


# -- bad input -----------------------------------------------------------------------------------

def test_bad_input_is_one_line_and_exit_2(candidate, tmp_path):
    db, cid = candidate
    cases = [
        (["nope/c9", "--db", str(db), "--format", "python"], "candidate 'nope/c9': no such candidate"),
        ([cid, "--db", str(db), "--format", "docx"], "--format: unknown format 'docx'"),
        (["baseline", "--format", "openai-agents"], "cannot express context"),
        (["baseline", "--format", "claude-agent-sdk"], "cannot express context"),
        ([str(tmp_path), "--format", "python"], "harness.yaml: missing"),
    ]
    for args, needle in cases:
        r = metaopt("export", *args, "--out", str(tmp_path / "out"))
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep")
    r = metaopt("export", "minimal", "--format", "harness", "--out", str(tmp_path / "full"))
    assert r.returncode == 2 and "not an empty folder" in r.stderr and (tmp_path / "full" / "x").read_text() == "keep"


def test_allow_gaps_exports_and_lists_every_gap(tmp_path):
    r = metaopt("export", "baseline", "--format", "openai-agents", "--out", str(tmp_path / "oa"), "--allow-gaps", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["gaps"] == ["context"]
    text = (tmp_path / "oa" / "README.md").read_text()
    assert "**context**" in text and "cannot express" in text


# -- a harness using every loop feature: verification, python and fresh tools, a sub-agent --------

FEATURES_YAML = """
schema_version: 1
name: featureful
prompts: {system: "Do the task.", roles: {helper: "You help."}, task_template: "TASK: {instruction}"}
tools:
- {name: bash, kind: shell, description: Run bash., template: "{command!raw}",
   parameters: {type: object, properties: {command: {type: string}}, required: [command]}}
- {name: py_len, kind: python, description: Length of text., script: "import json, sys\\nprint(len(json.load(sys.stdin)['text']))",
   parameters: {type: object, properties: {text: {type: string}}, required: [text]}}
- {name: fresh_echo, kind: shell, session: fresh, description: Echo a word., template: "echo {word}",
   parameters: {type: object, properties: {word: {type: string}}, required: [word]}}
- {name: helper, kind: agent, role: helper, description: Ask the helper.,
   parameters: {type: object, properties: {task: {type: string}}, required: [task]}}
- {name: finish, kind: finish, description: Done., parameters: {type: object, properties: {summary: {type: string}}}}
routing:
  roles: {main: {}, helper: {prompt: helper, tools: [bash, finish], max_turns: 4}}
  verification: {prompt: Verify first., max_rounds: 1}
"""

FEATURE_SCRIPT: list[dict[str, Any]] = [
    {"tool": "py_len", "id": "f1", "arguments": {"text": "hello"}},
    {"tool": "fresh_echo", "id": "f2", "arguments": {"word": "x y"}},
    {"tool": "helper", "id": "f3", "arguments": {"task": "say hi"}},
    {"tool": "bash", "id": "s1", "arguments": {"command": "echo sub"}},  # the helper's episode
    {"tool": "finish", "id": "s2", "arguments": {"summary": "sub early"}},
    {"tool": "finish", "id": "s3", "arguments": {"summary": "sub done"}},
    {"tool": "nosuch", "id": "f4", "arguments": {}},
    {"tool": "finish", "id": "f5", "arguments": {"summary": "a"}},
    {"tool": "finish", "id": "f6", "arguments": {"summary": "b"}},
]


@pytest.fixture
def featureful(tmp_path) -> Path:
    (tmp_path / "featureful").mkdir()
    (tmp_path / "featureful" / "harness.yaml").write_text(FEATURES_YAML)
    return tmp_path / "featureful"


def export_folder(folder: Path, fmt: str, out: Path) -> dict[str, Any]:
    r = metaopt("export", str(folder), "--format", fmt, "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_python_export_reproduces_verification_sub_agents_and_python_tools(featureful, tmp_path, make_sandbox):
    want = reference(load_harness(featureful), make_sandbox(), FEATURE_SCRIPT)
    assert [w[2] for w in want] == ["5", "x y", "[sub-agent helper ended: finished]\nsub done",
                                    "Unknown tool 'nosuch'. Available tools: bash, py_len, fresh_echo, helper, finish.",
                                    "Verify first.", "Finished."]
    info = export_folder(featureful, "python", tmp_path / "py")
    pkg = load_package(tmp_path / "py", info["package"])
    with ws.WireServer() as server:
        openai_replies(server, FEATURE_SCRIPT)
        model = pkg.OpenAIModel("m", client=openai.OpenAI(api_key="k", base_url=server.openai_url, max_retries=0))
        ep = pkg.HarnessAgent(model, SandboxExecutor(make_sandbox(), pkg.Result)).run("go")
        first = server.bodies(ws.OPENAI_PATH)[0]
    assert transcript(ep.messages) == want and ep.summary == "b"
    assert first["messages"][:2] == [{"role": "system", "content": "Do the task."}, {"role": "user", "content": "TASK: go"}]
    assert [t["function"]["name"] for t in first["tools"]] == ["bash", "py_len", "fresh_echo", "helper", "finish"]


# -- inspect -------------------------------------------------------------------------------------

def run_inspect(out: Path, package: str, script: list[dict[str, Any]], log_dir: Path):
    pytest.importorskip("inspect_ai", reason="the inspect extra is not installed")
    from inspect_ai import Task, eval
    from inspect_ai.agent import as_solver
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput, ModelUsage, get_model
    from inspect_ai.tool import ToolCall

    outputs = []
    for step in script:
        calls = [ToolCall(id=c["id"], function=c["tool"], arguments=c.get("arguments", {})) for c in script_calls(step)]
        message = ChatMessageAssistant(content=step.get("text", ""), tool_calls=calls or None)
        # usage given, so mockllm does not count tokens with tiktoken (which downloads its tables)
        outputs.append(ModelOutput(model="mockllm/model", choices=[ChatCompletionChoice(message=message, stop_reason="tool_calls")],
                                   usage=ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)))
    pkg = load_package(out, package)
    task = Task(dataset=[Sample(input="Write work/a.txt.")], solver=as_solver(pkg.harness_agent()), sandbox="local")
    [log] = eval(task, model=get_model("mockllm/model", custom_outputs=outputs), display="none", log_dir=str(log_dir))
    assert log.status == "success", log.error
    sample = log.samples[0]
    messages = [{"role": m.role, "parts": ([{"type": "text", "content": m.text}] if m.role != "tool" else [])
                 + [{"type": "tool_call", "id": c.id, "name": c.function, "arguments": c.arguments}
                    for c in (getattr(m, "tool_calls", None) or [])]
                 + ([{"type": "tool_call_response", "id": m.tool_call_id, "response": m.text,
                      "is_error": m.error is not None}] if m.role == "tool" else [])}
                for m in sample.messages]
    return transcript(messages), sample


def test_inspect_export_replays_the_script_like_the_task_agent(candidate, tmp_path, make_sandbox):
    info = export(candidate, "inspect", tmp_path / "ins")
    want = reference(stored_harness(candidate), make_sandbox())
    got, sample = run_inspect(tmp_path / "ins", info["package"], SCRIPT, tmp_path / "logs")
    assert got == want
    assert sample.output.completion == "wrote work/a.txt"
    assert sample.store["harness_episode"]["outcome"] == "finished"


def test_inspect_export_reproduces_verification_sub_agents_and_python_tools(featureful, tmp_path, make_sandbox):
    want = reference(load_harness(featureful), make_sandbox(), FEATURE_SCRIPT)
    info = export_folder(featureful, "inspect", tmp_path / "ins")
    got, _ = run_inspect(tmp_path / "ins", info["package"], FEATURE_SCRIPT, tmp_path / "logs")
    assert got == want


# -- openai-agents -------------------------------------------------------------------------------

def test_openai_agents_export_replays_the_script_like_the_task_agent(candidate, tmp_path, make_sandbox):
    pytest.importorskip("agents", reason="the export extra (openai-agents) is not installed")
    from agents import OpenAIChatCompletionsModel, RunConfig
    from agents.items import ToolCallItem, ToolCallOutputItem

    info = export(candidate, "openai-agents", tmp_path / "oa")
    pkg = load_package(tmp_path / "oa", info["package"])
    want = reference(stored_harness(candidate), make_sandbox())
    (tmp_path / "w").mkdir()
    with ws.WireServer() as server:
        openai_replies(server, SCRIPT)
        model = OpenAIChatCompletionsModel(model="m", openai_client=openai.AsyncOpenAI(api_key="k", base_url=server.openai_url,
                                                                                       max_retries=0))
        outcome = pkg.run("Write work/a.txt.", pkg.LocalExecutor(str(tmp_path / "w")), model=model,
                          run_config=RunConfig(tracing_disabled=True))
    calls = {i.raw_item.call_id: i.raw_item for i in outcome.result.new_items if isinstance(i, ToolCallItem)}
    got = [(calls[i.raw_item["call_id"]].name, json.loads(calls[i.raw_item["call_id"]].arguments), i.output)
           for i in outcome.result.new_items if isinstance(i, ToolCallOutputItem)]
    assert outcome.outcome == "finished" and outcome.summary == "wrote work/a.txt"
    assert got == [w[:3] for w in want]


def test_openai_agents_export_reproduces_verification_and_sub_agents(featureful, tmp_path, make_sandbox):
    pytest.importorskip("agents", reason="the export extra (openai-agents) is not installed")
    from agents import OpenAIChatCompletionsModel, RunConfig
    from agents.items import ToolCallOutputItem

    script = [s for s in FEATURE_SCRIPT if s["tool"] != "nosuch"]  # the SDK ends the run on unknown tools (README)
    want = reference(load_harness(featureful), make_sandbox(), script)
    r = metaopt("export", str(featureful), "--format", "openai-agents", "--out", str(tmp_path / "oa"), "--json")
    assert r.returncode == 0, r.stderr
    pkg = load_package(tmp_path / "oa", json.loads(r.stdout)["package"])
    (tmp_path / "w").mkdir()
    with ws.WireServer() as server:
        openai_replies(server, script)
        model = OpenAIChatCompletionsModel(model="m", openai_client=openai.AsyncOpenAI(api_key="k", base_url=server.openai_url,
                                                                                       max_retries=0))
        outcome = pkg.run("go", pkg.LocalExecutor(str(tmp_path / "w")), model=model, run_config=RunConfig(tracing_disabled=True))
    got = [i.output for i in outcome.result.new_items if isinstance(i, ToolCallOutputItem)]
    assert outcome.outcome == "finished" and got == [w[2] for w in want]


# -- claude-agent-sdk ----------------------------------------------------------------------------

def test_claude_agent_sdk_export_options_match_the_harness_and_tools_replay(candidate, tmp_path, make_sandbox):
    import asyncio

    pytest.importorskip("claude_agent_sdk", reason="the export extra (claude-agent-sdk) is not installed")
    info = export(candidate, "claude-agent-sdk", tmp_path / "cl")
    pkg = load_package(tmp_path / "cl", info["package"])
    h = stored_harness(candidate)
    options = pkg.build_options(pkg.LocalExecutor(str(tmp_path)))
    assert options.system_prompt == h.system_prompt("main") and options.tools == []
    assert options.allowed_tools == ["mcp__harness__bash", "mcp__harness__finish"]
    assert options.max_turns == h.routing.limits.max_turns == 16
    app = sys.modules[pkg.__name__ + ".claude_agent_app"]
    state = app.RunState()
    (tmp_path / "w").mkdir()
    tools = {t.name: t for t in app.harness_tools(pkg.LocalExecutor(str(tmp_path / "w")), state)}
    assert {n: t.input_schema for n, t in tools.items()} == {t.name: t.parameters for t in h.tools}
    got = []
    for step in SCRIPT:
        for c in script_calls(step):
            r = asyncio.run(tools[c["tool"]].handler(c.get("arguments", {})))
            got.append((c["tool"], c.get("arguments", {}), r["content"][0]["text"], r["is_error"]))
    assert got == reference(h, make_sandbox())
    hook = options.hooks["PostToolUse"][0]
    assert hook.matcher == "mcp__harness__finish" and state.finished
    assert asyncio.run(app.build_options(pkg.LocalExecutor(), state).hooks["PostToolUse"][0].hooks[0]({}, None, None)) == {
        "continue_": False, "stopReason": "finished"}


CONTEXT_SCRIPT = [{"tool": "bash", "id": f"k{i}", "arguments": {"command": f"seq {i} 400"}} for i in range(1, 5)] + [
    {"tool": "finish", "id": "k9", "arguments": {"summary": "ok"}}]


@pytest.mark.parametrize("fmt", ["python", "inspect"])
def test_context_budget_drops_the_same_old_outputs(featureful, tmp_path, make_sandbox, fmt):
    """routing.context: the exported loop drops the same old tool outputs as the task agent."""
    text = (featureful / "harness.yaml").read_text().replace("  verification:", "  context: {max_tokens: 1500}\n  verification:")
    (featureful / "harness.yaml").write_text(text)
    script = CONTEXT_SCRIPT[:-1] + [CONTEXT_SCRIPT[-1]] * 2  # finish twice: once challenged
    want = reference(load_harness(featureful), make_sandbox(), script)
    assert sum("[output dropped to fit the context window]" == w[2] for w in want) >= 2
    info = export_folder(featureful, fmt, tmp_path / fmt)
    if fmt == "inspect":
        got, _ = run_inspect(tmp_path / fmt, info["package"], script, tmp_path / "logs")
    else:
        pkg = load_package(tmp_path / fmt, info["package"])
        with ws.WireServer() as server:
            openai_replies(server, script)
            model = pkg.OpenAIModel("m", client=openai.OpenAI(api_key="k", base_url=server.openai_url, max_retries=0))
            got = transcript(pkg.HarnessAgent(model, pkg.LocalExecutor(str(tmp_path))).run("Write work/a.txt.").messages)
    assert got == want


class ScriptedAnthropic:
    """A stand-in for the streaming Anthropic Messages API, enough for Claude Code: requests that offer
the harness's tools (mcp__harness__*) get the next scripted step; any other request (Claude Code's
own side requests) gets a short text answer."""
    def __init__(self, script, prefix="mcp__harness__"):
        self.script, self.prefix, self.position = list(script), prefix, 0
        self.requests = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self):
        return "http://%s:%d" % self.httpd.server_address[:2]

    def __enter__(self):
        self.thread.start(); return self

    def __exit__(self, *a):
        self.httpd.shutdown(); self.httpd.server_close()

    def _blocks(self, body):
        tools = [t.get("name", "") for t in body.get("tools", [])]
        if not any(n.startswith(self.prefix) for n in tools) or self.position >= len(self.script):
            return [{"type": "text", "text": "ok"}], "end_turn"
        step = self.script[self.position]; self.position += 1
        calls = ([step] if "tool" in step else []) + step.get("tool_calls", [])
        blocks = ([{"type": "text", "text": step["text"]}] if "text" in step else []) + [
            {"type": "tool_use", "id": c["id"], "name": self.prefix + c["tool"], "input": c.get("arguments", {})} for c in calls]
        return blocks, "tool_use" if calls else "end_turn"

    def _handler(self):
        server = self
        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *a): pass
            def do_GET(self):
                self._json(200, {})
            def do_HEAD(self):
                self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try: body = json.loads(raw or b"{}")
                except ValueError: body = {}
                server.requests.append((self.path, body))
                if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                    return self._json(200, {"input_tokens": 10})
                blocks, stop = server._blocks(body)
                msg = {"id": "msg_%d" % len(server.requests), "type": "message", "role": "assistant", "model": body.get("model", "m"),
                       "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
                if not body.get("stream"):
                    return self._json(200, {**msg, "content": blocks, "stop_reason": stop})
                events = [("message_start", {"type": "message_start", "message": msg})]
                for i, b in enumerate(blocks):
                    start = {**b, "input": {}} if b["type"] == "tool_use" else {"type": "text", "text": ""}
                    delta = ({"type": "input_json_delta", "partial_json": json.dumps(b["input"])} if b["type"] == "tool_use"
                             else {"type": "text_delta", "text": b["text"]})
                    events += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
                               ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                               ("content_block_stop", {"type": "content_block_stop", "index": i})]
                events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                              "usage": {"output_tokens": 5}}), ("message_stop", {"type": "message_stop"})]
                data = "".join("event: %s\ndata: %s\n\n" % (e, json.dumps(d)) for e, d in events).encode()
                self.send_response(200); self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
            def _json(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status); self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
        return H


def test_claude_agent_sdk_export_runs_under_claude_code_like_the_task_agent(candidate, tmp_path, make_sandbox):
    pytest.importorskip("claude_agent_sdk", reason="the export extra (claude-agent-sdk) is not installed")
    # c6 (invalid arguments) is left out: the SDK's MCP server answers it itself (README note)
    script = [{**s, "tool_calls": [c for c in s["tool_calls"] if c["id"] != "c6"]} if "tool_calls" in s else s for s in SCRIPT]
    want = reference(stored_harness(candidate), make_sandbox(), script)
    info = export(candidate, "claude-agent-sdk", tmp_path / "cl")
    pkg = load_package(tmp_path / "cl", info["package"])
    (tmp_path / "w").mkdir()
    (tmp_path / "home").mkdir()
    with ScriptedAnthropic(script) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-test", "HOME": str(tmp_path / "home"),
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
        state, messages = pkg.run("Write work/a.txt.", pkg.LocalExecutor(str(tmp_path / "w")), cwd=str(tmp_path / "w"),
                                  env=env, model="claude-export-test")
    scripted = [b for _, b in server.requests if any(t.get("name", "").startswith("mcp__harness__") for t in b.get("tools", []))]
    calls, got = {}, []
    for m in messages:
        for b in getattr(m, "content", None) or []:
            if type(b).__name__ == "ToolUseBlock":
                calls[b.id] = b
            elif type(b).__name__ == "ToolResultBlock":
                text = b.content if isinstance(b.content, str) else "\n".join(c["text"] for c in b.content)
                c = calls[b.tool_use_id]
                got.append((c.name.removeprefix("mcp__harness__"), c.input, text, bool(b.is_error)))
    assert got == want
    assert state.finished and state.summary == "wrote work/a.txt"
    assert len(scripted) == len(script)  # the hook ended the session at finish: no request after it
    names = [t["name"] for t in scripted[0]["tools"]]  # Claude Code may add a DeferredToolPlaceholder of its own
    assert [n for n in names if n.startswith("mcp__")] == ["mcp__harness__bash", "mcp__harness__finish"]
    assert not {"Bash", "Read", "Write", "Edit"} & set(names)
    assert stored_harness(candidate).prompts.system in json.dumps(scripted[0]["system"])


def test_claude_agent_sdk_export_challenges_finish_and_runs_python_tools(featureful, tmp_path, make_sandbox):
    pytest.importorskip("claude_agent_sdk", reason="the export extra (claude-agent-sdk) is not installed")
    text = (featureful / "harness.yaml").read_text()
    text = text[:text.index("- {name: helper")] + text[text.index("- {name: finish"):]  # no sub-agents: Claude Code cannot
    (featureful / "harness.yaml").write_text(text.replace("helper: {prompt: helper, tools: [bash, finish], max_turns: 4}", ""))
    script = [FEATURE_SCRIPT[0], FEATURE_SCRIPT[1], FEATURE_SCRIPT[-2], FEATURE_SCRIPT[-1]]
    want = reference(load_harness(featureful), make_sandbox(), script)
    assert [w[2] for w in want] == ["5", "x y", "Verify first.", "Finished."]
    pkg = load_package(tmp_path / "cl", export_folder(featureful, "claude-agent-sdk", tmp_path / "cl")["package"])
    (tmp_path / "home").mkdir()
    with ScriptedAnthropic(script) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-test", "HOME": str(tmp_path / "home"),
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
        state, messages = pkg.run("go", pkg.LocalExecutor(str(tmp_path)), cwd=str(tmp_path), env=env, model="claude-export-test")
    results = [b.content if isinstance(b.content, str) else "\n".join(c["text"] for c in b.content)
               for m in messages for b in (getattr(m, "content", None) or []) if type(b).__name__ == "ToolResultBlock"]
    assert results == [w[2] for w in want] and state.finished and state.summary == "b" and server.position == len(script)


def test_the_run_report_names_an_export_command_that_works(candidate, tmp_path):
    db, _ = candidate
    with Store(db, read_only=True) as s:
        [exp] = s.rows("SELECT experiment_id FROM experiments")
    r = metaopt("run", "--resume", exp["experiment_id"], "--db", str(db), timeout=120)  # finished: prints the report
    assert r.returncode == 0, r.stderr
    [line] = [ln for ln in r.stdout.splitlines() if ln.startswith("export the best: ")]
    argv = line.removeprefix("export the best: metaopt ").split()
    assert argv[:2] == ["export", argv[1]] and argv[1].startswith(exp["experiment_id"])
    out = tmp_path / "best"
    r = metaopt(*[str(out) if a == "DIR" else a for a in argv], "--db", str(db), timeout=120)
    assert r.returncode == 0, r.stderr
    assert (out / "README.md").read_text().count(argv[1]) >= 1
