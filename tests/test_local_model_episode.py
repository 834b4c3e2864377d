"""The real 0.5B model (local/qwen2.5-coder-0.5b, pulled on first use if setup.sh has not) driving
real episodes. Protocol facts only, never task success: well-formed tool calls reach the Docker
sandbox and their results go back, spans name the real model with the server's token counts and
a cost of 0, the episode stays within its limits. Bounded for CI: temperature 0, 4 turns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from metaopt.task_agent.harness_io import harness_from_data, load_harness, resolve_harness
from metaopt.task_agent.messages import Message, ModelSettings, ToolSpec
from metaopt.task_agent.models import allow_model_requests, get_model
from metaopt.task_agent.models.local_server import LocalSettings

REPO = Path(__file__).resolve().parents[1]
MODEL = "local/qwen2.5-coder-0.5b"
MAX_TURNS = 4


def small_baseline(folder: Path) -> Path:
    """The baseline harness with a 4-turn cap, temperature 0 and 256 output tokens per call."""
    data = load_harness(resolve_harness("baseline")).model_dump(mode="json", exclude_unset=True)
    data["routing"]["limits"] = {**data["routing"].get("limits", {}), "max_turns": MAX_TURNS}
    data["routing"]["context"] = {"max_tokens": 6000}
    data["model"] = {"temperature": 0.0, "max_tokens": 256}
    harness_from_data(data).save(folder)
    return folder


@pytest.mark.usefixtures("local_model")
@pytest.mark.usefixtures("docker_image")
@pytest.mark.timeout(900)
def test_eval_with_the_local_model_runs_a_real_episode_and_stores_its_trace(tmp_path):
    db = tmp_path / "m.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO), "METAOPT_ALLOW_MODEL_REQUESTS": "1",
           "METAOPT_LOCAL_PARALLEL": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "metaopt.cli", "eval", "--benchmark", "terminalbench-sample",
         "--tasks", "hello-greetings", "--harness", str(small_baseline(tmp_path / "h")), "--model", MODEL,
         "--db", str(db), "--json"], capture_output=True, check=False, text=True, env=env, cwd=tmp_path, timeout=850)
    assert r.returncode == 0, r.stderr[-3000:]
    [task] = json.loads(r.stdout)["tasks"]
    assert task["status"] in ("passed", "failed", "timeout"), task  # scored: no infrastructure error
    con = duckdb.connect(str(db), read_only=True)
    [trial] = con.sql("SELECT trial_id, input_tokens, output_tokens, cost_usd, agent_duration_s FROM trials").fetchall()
    trial_id, input_tokens, output_tokens, cost, agent_s = trial
    assert input_tokens > 0 and output_tokens > 0 and cost == 0.0  # known to be free, not unknown (NULL)
    spans = con.sql("SELECT span_id, operation_name, provider, request_model, response_model, input_tokens, "
                    "output_tokens, cost_usd, tool_name, tool_call_id, attributes, start_ns FROM spans "
                    "WHERE trial_id = ? ORDER BY start_ns", params=[trial_id]).fetchall()
    chats = [s for s in spans if s[1] == "chat"]
    tools = [s for s in spans if s[1] == "execute_tool"]
    [agent] = [s for s in spans if s[1] == "invoke_agent"]
    assert 1 <= len(chats) <= MAX_TURNS
    for _, _, provider, req, resp, tin, tout, c, *_ in chats:
        assert (provider, req, resp) == ("llama.cpp", "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b")
        assert tin > 0 and tout > 0 and c == 0.0
    assert sum(s[5] for s in chats) == input_tokens and sum(s[6] for s in chats) == output_tokens
    outcome = json.loads(agent[10])["metaopt.outcome"]
    assert outcome in ("finished", "no_tool_call", "turn_limit", "time_limit"), outcome  # not a model error
    assert agent_s < 300 + 15  # the task's agent timeout (+ the last tool call and teardown)
    # well-formed calls reached the sandbox: a harness tool ran there and reported an exit code
    ran = [t for t in tools if t[8] in ("bash", "read_file", "write_file")
           and "metaopt.tool.exit_code" in json.loads(t[10])]
    assert ran, [(t[8], t[10]) for t in tools]
    # ... and every result went back to the model in the next chat call (all but the last turn's)
    returned = {row[0] for row in con.sql(
        "SELECT m.tool_call_id FROM messages m JOIN spans s USING (span_id) "
        "WHERE s.trial_id = ? AND s.operation_name = 'chat' AND m.direction = 'input' AND m.role = 'tool'",
        params=[trial_id]).fetchall()}
    before_last_chat = {t[9] for t in tools if t[11] < chats[-1][11]}
    assert before_last_chat <= returned and (before_last_chat or len(chats) == 1)


@pytest.mark.usefixtures("local_model")
@pytest.mark.timeout(300)
def test_calls_the_model_writes_as_text_are_recovered_with_the_builtin_template():
    """As shipped (the GGUF's own template), Qwen2.5-Coder writes its call as fenced JSON in the
    text and llama.cpp returns no tool_calls; the client recovers it and keeps the raw text."""
    settings = LocalSettings(template="builtin", parallel=1, ctx=4096)
    model = get_model(MODEL, context={"local_settings": settings})
    bash = ToolSpec(name="bash", description="Run a shell command in the task container",
                    parameters={"type": "object", "properties": {"command": {"type": "string"}},
                                "required": ["command"]})
    with allow_model_requests():
        r = model.generate([Message.system("You are a terminal agent. Use the bash tool."),
                            Message.user("Create the directory /app/out.")], [bash],
                           ModelSettings(model=MODEL, temperature=0, max_tokens=120))
    model.server.stop()
    [call] = r.message.tool_calls
    assert call.name == "bash" and isinstance(call.arguments.get("command"), str) and not call.arguments_error
    assert r.unparsed_output is not None and '"name": "bash"' in r.unparsed_output
    assert r.finish_reason == "tool_call" and r.cost_usd == 0.0 and r.usage.output_tokens > 0
