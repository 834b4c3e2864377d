"""Shared pieces of the export equivalence tests: the scripted model's steps, a candidate from a
real offline optimizer run, the in-tree TaskAgent's transcript as the reference, and ways to load
and drive an exported package (imported by tests/test_export*.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import wire_servers as ws
from _docker_fixtures import metaopt
from _step_tasks import make_tasks

from metaopt.task_agent.harness import Harness
from metaopt.task_agent.loop import TaskAgent
from metaopt.task_agent.models.fake import ScriptModel
from metaopt.traces.store import Store

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
def candidate(docker_image, tmp_path_factory) -> tuple[Path, str]:
    """(store, candidate id): a one-iteration offline optimizer run (about 15 s)."""
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
