"""The harness agent from the command line: bad input, and reading traces back."""

import json
import subprocess
import sys

import pytest
from _docker_fixtures import metaopt


@pytest.mark.parametrize("args, needle", [
    (["--model", "nope/x"], "known providers: anthropic, fake, local, openai, openai-compatible"),
    (["--model", "anthropic/claude-haiku-4-5"], "ANTHROPIC_API_KEY is not set"),
    (["--model", "openai/gpt-4.1"], "OPENAI_API_KEY is not set"),
    (["--model", "fake/solution", "--harness", "no-such-harness"], "no such harness folder"),
    (["--model", "fake/nop", "--agent", "oracle"], "not both"),
    (["--harness", "minimal"], "--harness needs --model"),
])
def test_bad_agent_input_is_one_line_exit_2(tmp_path, args, needle):
    r = metaopt("eval", "--benchmark", "terminalbench-sample", *args, "--db", str(tmp_path / "x.duckdb"))
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.duckdb").exists()


def test_bad_harness_names_file_and_field(tmp_path):
    h = tmp_path / "h"
    h.mkdir()
    (h / "harness.yaml").write_text("schema_version: 1\nname: h\nrouting:\n  limits:\n    max_turnz: 3\n")
    r = metaopt("eval", "--benchmark", "terminalbench-sample", "--model", "fake/nop", "--harness", str(h),
                "--db", str(tmp_path / "x.duckdb"))
    assert r.returncode == 2
    assert "harness.yaml" in r.stderr and "routing.limits.max_turnz" in r.stderr


@pytest.mark.usefixtures("docker_image")
def test_traces_commands_read_a_run_back(docker_image, tmp_path):
    db = str(tmp_path / "t.duckdb")
    r = metaopt("eval", "--benchmark", "terminalbench-sample", "--model", "fake/solution", "--harness", "minimal",
                "--tasks", "hello-greetings", "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout)
    [trial] = json.loads(metaopt("traces", "list", "--db", db, "--json").stdout)
    assert trial["task_id"] == "hello-greetings" and trial["trace_id"]
    shown = metaopt("traces", "show", trial["trial_id"], "--db", db, "--json")
    data = json.loads(shown.stdout)
    tools = [e for e in data["transcript"] if e["type"] == "tool"]
    assert tools[0]["name"] == "bash" and tools[0]["arguments"] == {"command": "bash /oracle/solution.sh"}
    assert data["transcript"][0]["type"] == "system" and data["agent"]["outcome"] == "finished"
    text = metaopt("traces", "show", trial["trial_id"], "--db", db).stdout
    assert "bash /oracle/solution.sh" in text and "short test summary info" in text
    rows = json.loads(metaopt("traces", "sql", "SELECT operation_name, count(*) AS n FROM spans GROUP BY 1",
                              "--db", db, "--json").stdout)
    assert {r["operation_name"] for r in rows} == {"invoke_agent", "chat", "execute_tool"}
    assert run["tasks"][0]["score"] == 1.0
    bad = metaopt("traces", "show", "no-such-trial", "--db", db)
    assert bad.returncode == 2 and "no trial 'no-such-trial'" in bad.stderr
    missing = metaopt("traces", "list", "--db", str(tmp_path / "none.duckdb"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr


@pytest.mark.usefixtures("docker_image")
def test_hello_world_example_runs(docker_image):
    root = __import__("pathlib").Path(__file__).parents[1]
    r = subprocess.run([sys.executable, str(root / "examples" / "hello_world.py"), "hello-greetings"],
                       capture_output=True, check=False, text=True, timeout=300, cwd=root)
    assert r.returncode == 0, r.stderr
    assert "hello-greetings: passed (score 1.0)" in r.stdout and "bash(" in r.stdout
