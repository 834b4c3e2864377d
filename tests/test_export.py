"""`metaopt export`: every format is exported from a candidate of a real offline optimizer run and
replays the same scripted model as the in-tree TaskAgent (fake/script) with the same tool calls
and outputs. The in-tree reference runs in a Docker sandbox; the python export runs through the
real openai/anthropic SDKs against the local stand-in servers (tests/wire_servers.py) with an
executor over a second container; inspect and openai-agents exports run under their frameworks
(tests/test_export_frameworks.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
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
    outputs = [pkg.harness_runtime.run_tool(bash, {"command": c}, ex) for c in ("cd /; export X=1", "pwd; echo $X", "sleep 30")]
    assert outputs[1] == ("/\n1", False)
    assert outputs[2] == (f"[command timed out after {bash['timeout_s']:g} s]", True)
    assert "api_key" not in " ".join(p.read_text() for p in (tmp_path / "py").rglob("*.py")).lower().replace(
        "anthropic_api_key", "").replace("openai_api_key", "")


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
