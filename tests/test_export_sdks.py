"""`metaopt export` to the openai-agents and claude-agent-sdk formats, each replaying the same
scripted model as the in-tree TaskAgent with the same tool calls and outputs: the openai-agents
export under the SDK's Runner against the stand-in OpenAI server, the claude-agent-sdk export
under the Claude Code CLI bundled with the SDK against a streaming Anthropic stand-in
(wire_servers.ScriptedAnthropic). Skipped when the `export` extra is not installed."""

from __future__ import annotations

import json
import sys

import openai
import pytest
import wire_servers as ws
from _docker_fixtures import metaopt
from _export_helpers import (
    FEATURE_SCRIPT,
    SCRIPT,
    export,
    export_folder,
    load_package,
    openai_replies,
    reference,
    script_calls,
    stored_harness,
)
from wire_servers import ScriptedAnthropic

from metaopt.task_agent.harness_io import load_harness

pytestmark = pytest.mark.usefixtures("docker_image")


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
