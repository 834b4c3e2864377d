"""The harness format: shipped harnesses load, round trips are stable, and every mistake is
reported in one line naming the file and the field path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from metaopt.core.errors import HarnessError
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.harness_io import harness_from_data, load_harness

HARNESSES = Path(__file__).resolve().parent.parent / "metaopt" / "harnesses"


def _write(folder: Path, data: dict, prompts: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "harness.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    for rel, text in (prompts or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def _data(**over: object) -> dict:
    data: dict = {
        "schema_version": 1,
        "name": "t",
        "prompts": {"system": "be good"},
        "tools": [
            {"name": "bash", "kind": "shell", "description": "run",
             "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                            "required": ["command"]},
             "template": "{command!raw}"},
            {"name": "finish", "kind": "finish", "description": "done"},
        ],
    }
    data.update(over)
    return data


def _error(tmp_path: Path, data: dict, prompts: dict[str, str] | None = None) -> str:
    folder = _write(tmp_path / "h", data, prompts)
    with pytest.raises(HarnessError) as info:
        load_harness(folder)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{folder / 'harness.yaml'}: ")
    return message.removeprefix(f"{folder / 'harness.yaml'}: ")


@pytest.mark.parametrize("name", ["baseline", "minimal"])
def test_shipped_harnesses_load_and_round_trip(name: str, tmp_path: Path) -> None:
    h = load_harness(HARNESSES / name)
    assert h.name == name
    assert h.system_prompt(h.routing.start_role)
    assert h.tool_specs(h.routing.start_role)
    h.save(tmp_path / name)
    again = load_harness(tmp_path / name)
    assert again == h
    assert again.content_hash() == h.content_hash()
    # the shipped folders are already in the canonical layout save() writes
    for shipped in (HARNESSES / name).rglob("*"):
        if shipped.is_file():
            rel = shipped.relative_to(HARNESSES / name)
            assert (tmp_path / name / rel).read_text() == shipped.read_text(), rel


def test_shipped_harness_knobs() -> None:
    base, mini = load_harness(HARNESSES / "baseline"), load_harness(HARNESSES / "minimal")
    bash = {t.name: t for t in base.tools}["bash"]
    assert (bash.session, bash.timeout_s, bash.output_limit) == ("persistent", 120, 20000)
    assert {t.name for t in base.tools} == {"bash", "read_file", "write_file", "finish"}
    assert base.routing.limits.max_turns == 60 and base.routing.verification is not None
    assert (mini.tools[0].timeout_s, mini.tools[0].output_limit) == (10, 1000)
    assert mini.routing.limits.max_turns == 8 and mini.routing.verification is None


def test_save_inlines_and_writes_prompt_files(tmp_path: Path) -> None:
    h = harness_from_data(_data(
        prompts={"system": "sys\nline 2", "roles": {"checker": "check things"},
                 "task_template": "Task:\n{instruction}"},
        routing={"roles": {"main": {}, "checker": {"prompt": "checker"}},
                 "verification": {"prompt": "sure?"}}))
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "old.md").write_text("stale")
    h.save(tmp_path)
    assert sorted(p.name for p in (tmp_path / "prompts").iterdir()) == [
        "role-checker.md", "system.md", "task_template.md", "verification.md"]
    assert (tmp_path / "prompts" / "system.md").read_text() == "sys\nline 2\n"
    raw = yaml.safe_load((tmp_path / "harness.yaml").read_text())
    assert raw["prompts"]["roles"]["checker"] == {"file": "prompts/role-checker.md"}
    again = load_harness(tmp_path)
    assert again == h and again.system_prompt("checker") == "sys\nline 2\n\ncheck things"
    assert again.render_task("do X") == "Task:\ndo X"


def test_content_hash_changes_with_one_prompt_line(tmp_path: Path) -> None:
    shutil.copytree(HARNESSES / "baseline", tmp_path / "b")
    before = load_harness(tmp_path / "b").content_hash()
    system = tmp_path / "b" / "prompts" / "system.md"
    system.write_text(system.read_text().replace("Explore first.", "Explore first!"))
    assert load_harness(tmp_path / "b").content_hash() != before
    assert len(before) == 64


def test_unknown_key_names_file_and_field_path(tmp_path: Path) -> None:
    msg = _error(tmp_path, _data(routing={"limits": {"max_turnz": 3}}))
    assert msg.startswith("routing.limits.max_turnz: unknown key")
    assert "max_turns" in msg  # the known keys are listed
    msg = _error(tmp_path, _data(routing={"verification": {"prompt": "x", "rounds": 2}}))
    assert msg == "routing.verification.rounds: unknown key (known: prompt, max_rounds)"
    msg = _error(tmp_path, _data(routing={"roles": {"main": {"tool": []}}}))
    assert msg == "routing.roles.main.tool: unknown key (known: prompt, tools, max_turns)"
    assert _error(tmp_path, _data(tools=[{**_data()["tools"][0], "timeout": 5}])).startswith(
        "tools[0].timeout: unknown key (known: name, kind, description")


def test_bad_type_names_field(tmp_path: Path) -> None:
    tools = _data()["tools"]
    tools[1] = {**tools[1], "timeout_s": "soon"}
    assert _error(tmp_path, _data(tools=tools)).startswith("tools[1].timeout_s: Input should be a valid number")
    assert _error(tmp_path, _data(model={"temperature": "hot"})).startswith("model.temperature:")


def test_missing_prompt_file_and_folder(tmp_path: Path) -> None:
    msg = _error(tmp_path, _data(prompts={"system": {"file": "prompts/system.md"}}))
    assert msg.startswith("prompts.system: prompt file") and "prompts/system.md does not exist" in msg
    msg = _error(tmp_path, _data(prompts={"system": {"file": "../../etc/passwd"}}))
    assert "outside the harness folder" in msg
    msg = _error(tmp_path, _data(prompts={"system": {"path": "x.md"}}))
    assert msg.startswith("prompts.system: a prompt is inline text or {file: PATH}")
    with pytest.raises(HarnessError, match="no such harness folder"):
        load_harness(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(HarnessError, match=r"empty/harness.yaml: missing"):
        load_harness(tmp_path / "empty")


def test_prompt_file_loses_one_trailing_newline(tmp_path: Path) -> None:
    folder = _write(tmp_path / "h", _data(prompts={"system": {"file": "prompts/s.md"}}),
                    {"prompts/s.md": "line one\n\n"})
    assert load_harness(folder / "harness.yaml").prompts.system == "line one\n"


def test_cross_field_errors(tmp_path: Path) -> None:
    tools = _data()["tools"]
    assert _error(tmp_path, _data(tools=[tools[0], tools[0]])).startswith(
        "tools[1].name: duplicate tool name 'bash' (also tools[0])")
    msg = _error(tmp_path, _data(routing={"roles": {"main": {"tools": ["bash", "grep"]}}}))
    assert msg.startswith("routing.roles.main.tools[1]: unknown tool 'grep' (tools: bash, finish)")
    assert _error(tmp_path, _data(routing={"start_role": "boss"})).startswith(
        "routing.start_role: unknown role 'boss'")
    agent = {"name": "helper", "kind": "agent", "description": "d", "role": "ghost"}
    assert _error(tmp_path, _data(tools=[*tools, agent])).startswith("tools[2].role: unknown role 'ghost'")
    assert _error(tmp_path, _data(tools=[*tools, {**tools[1], "name": "done"}])).startswith(
        "tools: at most one finish tool")
    assert _error(tmp_path, _data(routing={"roles": {"main": {"prompt": "nope"}}})).startswith(
        "routing.roles.main.prompt: no prompts.roles.nope")


def test_tool_definition_errors(tmp_path: Path) -> None:
    bash = _data()["tools"][0]
    cases = {
        "tools[0]: template is required for shell tools": {k: v for k, v in bash.items() if k != "template"},
        "tools[0]: script does not apply to shell tools": {**bash, "script": "print(1)"},
        "tools[0]: template: placeholder {cmd} is not a parameter": {**bash, "template": "echo {cmd}"},
        "tools[0]: template: lone '{'": {**bash, "template": "awk '{print $1}'"},
        "tools[0]: template: placeholder {HOME} is not a parameter (declared: command); write {{":
            {**bash, "template": "echo ${HOME}"},
        "tools[0]: parameters: required names undeclared properties: x":
            {**bash, "parameters": {"type": "object", "properties": {}, "required": ["x"]}},
        "tools[0]: parameters: must be a JSON schema with type: object": {**bash, "parameters": {"type": "string"}},
        "tools[0]: script: line 1:": {"name": "py", "kind": "python", "description": "d", "script": "def ("},
        "tools[0].name: String should match pattern": {**bash, "name": "has space"},
        "tools[0].kind: Input should be 'shell', 'python', 'finish' or 'agent'": {**bash, "kind": "ssh"},
    }
    for expected, tool in cases.items():
        assert _error(tmp_path, _data(tools=[tool])).startswith(expected), expected
    ok = harness_from_data(_data(tools=[{**bash, "template": "echo ${{HOME}} {command}"}]))
    assert ok.tools[0].template == "echo ${{HOME}} {command}"


def test_schema_version_2_rejected_clearly(tmp_path: Path) -> None:
    assert _error(tmp_path, _data(schema_version=2)) == (
        "schema_version: 2 is not supported (this metaopt reads harness schema_version 1)")
    data = _data()
    del data["schema_version"]
    assert _error(tmp_path, data).startswith("schema_version: missing")


def test_invalid_yaml_and_non_mapping(tmp_path: Path) -> None:
    folder = tmp_path / "h"
    folder.mkdir()
    (folder / "harness.yaml").write_text("name: [unclosed\n")
    with pytest.raises(HarnessError, match=r"harness.yaml: invalid YAML at line \d+, column \d+"):
        load_harness(folder)
    (folder / "harness.yaml").write_text("- a list\n")
    with pytest.raises(HarnessError, match="expected a mapping at the top level"):
        load_harness(folder)


def test_model_settings_and_tool_specs() -> None:
    h = harness_from_data(_data(model={"temperature": 0.2, "max_tokens": 1000},
                                routing={"roles": {"main": {"tools": ["bash"]}}}))
    s = h.model_settings("fake/nop")
    assert (s.model, s.temperature, s.max_tokens) == ("fake/nop", 0.2, 1000)
    assert harness_from_data(_data(model={"model": "openai/x"})).model_settings("fake/nop").model == "openai/x"
    assert harness_from_data(_data()).model_settings("a/b").max_tokens == 4096  # ModelSettings default
    with pytest.raises(ValueError, match="names no model"):
        h.model_settings(None)
    assert [t.name for t in h.tool_specs("main")] == ["bash"]
    assert h.tool_specs("main")[0].parameters["required"] == ["command"]


def test_hash_ignores_layout_but_not_defaults_changes() -> None:
    inline = harness_from_data(_data(routing={"limits": {"max_turns": 50}}))
    implicit = harness_from_data(_data())
    assert inline.content_hash() == implicit.content_hash()  # 50 is the default
    assert harness_from_data(_data(routing={"limits": {"max_turns": 51}})).content_hash() != implicit.content_hash()
    assert isinstance(implicit, Harness)
