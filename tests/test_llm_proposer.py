"""The `llm` proposer: a meta-agent loop driven by a scripted fake model.

Offline units (no Docker): routing of --meta-model values, how the loop ends, spend, tool errors.
Docker: the tools over a store filled by a real traced `metaopt eval` (raw transcript text reaches
the model, trials outside the evidence are refused), and `metaopt run --meta-model fake/script:`
end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _docker_fixtures import metaopt
from _step_tasks import make_tasks

from metaopt.core.errors import MissingApiKey, UserError
from metaopt.evaluation import TrialResult
from metaopt.meta_agent.proposers import Evidence, get_proposer
from metaopt.meta_agent.proposers.heuristic import HeuristicProposer
from metaopt.meta_agent.proposers.llm import LLMProposer
from metaopt.meta_agent.proposers.llm_context import ELIDED
from metaopt.meta_agent.proposers.llm_tools import harness_yaml
from metaopt.task_agent.harness_io import harness_from_data, load_harness, resolve_harness
from metaopt.task_agent.messages import Message, ModelResponse, TextPart, ToolCallPart
from metaopt.task_agent.models.toolcall_text import with_text_calls
from metaopt.traces.store import Store

MINIMAL = load_harness(resolve_harness("minimal"))


def more_turns(h=MINIMAL, turns: int = 32) -> str:
    data = yaml.safe_load(harness_yaml(h))
    data["routing"]["limits"]["max_turns"] = turns
    return yaml.safe_dump(data, sort_keys=False)


def script(tmp_path: Path, steps: list[dict], name: str = "meta.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(steps, sort_keys=False))
    return f"fake/script:{path}"


# -- offline -------------------------------------------------------------------------------------------
def test_meta_model_names_select_the_proposer(tmp_path):
    assert isinstance(get_proposer("heuristic"), HeuristicProposer)
    p = get_proposer(script(tmp_path, [{"text": "hi"}]))
    assert isinstance(p, LLMProposer) and p.name == "llm"
    assert isinstance(get_proposer("llm", script(tmp_path, [{"text": "hi"}])), LLMProposer)
    with pytest.raises(UserError):
        get_proposer("llm")
    with pytest.raises(UserError):
        get_proposer("smart")
    with pytest.raises(MissingApiKey):  # conftest removes the keys: fails at construction, before any spend
        get_proposer("anthropic/claude-opus-4-1")


def test_no_evidence_means_no_model_call(tmp_path):
    p = LLMProposer(script(tmp_path, [{"text": "hi"}]))
    with Store(tmp_path / "s.duckdb") as s:
        assert p.propose(MINIMAL, Evidence(s, [], "exp"), set()) is None
    assert p.model.calls == []


def test_a_model_that_stops_without_writing_proposes_nothing(tmp_path):
    p = LLMProposer(script(tmp_path, [{"tool": "read_harness"}, {"text": "Nothing to improve."}]))
    with Store(tmp_path / "s.duckdb") as s:
        assert p.propose(MINIMAL, Evidence(s, ["t-1"], "exp"), set()) is None
    assert len(p.model.calls) == 2 and p.last_run["outcome"] == "stopped without a revision"
    # the system prompt explains the job and the rules
    system = p.model.calls[0].messages[0].text
    assert "If this exact task disappeared" in system and "`model` section" in system
    assert "routing.limits.max_turns" in system  # the generated format reference
    assert {t.name for t in p.model.calls[0].tools} == {
        "list_failures", "failure_clusters", "read_trial", "search_traces", "read_harness", "history", "read_candidate",
        "compare_train_task", "add_note", "set_field", "edit_prompt", "set_tool", "remove_tool", "write_revision"}


def test_max_turns_ends_the_session(tmp_path):
    p = LLMProposer(script(tmp_path, [{"tool": "read_harness"}] * 10), max_turns=4)
    with Store(tmp_path / "s.duckdb") as s:
        assert p.propose(MINIMAL, Evidence(s, ["t-1"], "exp"), set()) is None
    assert len(p.model.calls) == 4 and p.last_run["outcome"] == "max_turns"
    assert "turn(s) left" in p.model.calls[-1].messages[-1].parts[0].response


def test_old_tool_results_are_elided_when_the_history_outgrows_its_budget(tmp_path):
    p = LLMProposer(script(tmp_path, [{"tool": "read_harness"}] * 3), max_turns=3, max_context_chars=100)
    with Store(tmp_path / "s.duckdb") as s:
        assert p.propose(MINIMAL, Evidence(s, ["t-1"], "exp"), set()) is None
    shown = [m.parts[0].response for m in p.model.calls[-1].messages if m.role == "tool"]
    assert shown[0] == ELIDED and shown[-1].startswith("schema_version: 1")


class PricedModel:
    """Answers one scripted message per call with a given cost (None = unknown price)."""

    provider, name = "stub", "stub/priced"

    def __init__(self, turns: list[tuple[list, float | None]]):
        self.turns, self.seen = turns, []

    def generate(self, messages, tools, settings):
        self.seen.append(list(messages))
        parts, cost = self.turns[len(self.seen) - 1]
        return ModelResponse(message=Message(role="assistant", parts=parts), cost_usd=cost, model=self.name,
                             provider="stub", finish_reason="tool_call")


def write(i: int, text: str, cites=("t-1",), rationale="more turns") -> list:
    return [ToolCallPart(id=f"w{i}", name="write_revision",
                         arguments={"harness_yaml": text, "rationale": rationale, "cites": list(cites),
                                    "cause": "turn limit", "fixes": [], "keeps": []})]


def test_write_revision_rejects_what_cannot_be_evaluated_and_sums_spend(tmp_path):
    tried_yaml = more_turns(turns=16)
    tried_hash = harness_from_data(yaml.safe_load(tried_yaml)).content_hash()
    changed_model = yaml.safe_load(more_turns())
    changed_model["model"] = {"temperature": 0.0}
    named = yaml.safe_load(more_turns())
    named["prompts"]["system"] += " Remember steps-00 needs care."
    model = PricedModel([
        (write(1, "schema_version: 1\nname: x\ntools: [{name: bash}]\n"), 0.5),  # schema error
        (write(2, harness_yaml(MINIMAL)), None),  # identical to the parent
        (write(3, tried_yaml), 0.25),  # already tried
        (write(4, yaml.safe_dump(changed_model)), 0.25),  # model section frozen
        (write(5, yaml.safe_dump(named)), 0.25),  # names a task id the meta-agent saw
        (write(6, more_turns(), cites=("t-1", "made-up")), 0.5),
    ])
    p = LLMProposer(model)
    with Store(tmp_path / "s.duckdb") as s:
        s.insert(TrialResult(trial_id="t-1", run_id="r", benchmark="b", task_id="steps-00", attempt=0,
                             agent="a", status="failed", score=0.0))
        rev = p.propose(MINIMAL, Evidence(s, ["t-1"], "exp"), {tried_hash})
    errors = [m.parts[0] for m in model.seen[-1] if m.role == "tool"]
    assert all(e.is_error for e in errors) and len(errors) == 5
    assert "tools[0].kind" in errors[0].response
    assert "identical" in errors[1].response
    assert "already proposed" in errors[2].response
    assert "model section" in errors[3].response
    assert "task id" in errors[4].response
    assert rev is not None and rev.harness.routing.limits.max_turns == 32
    assert rev.cites == ["t-1"]  # the made-up cite is dropped
    assert rev.usd == pytest.approx(1.75)
    assert rev.rationale.startswith("more turns") and "1 model call(s) of unknown price" in rev.rationale
    assert p.last_run["unpriced_calls"] == 1 and p.spent_usd == pytest.approx(1.75)


class LongWinded:
    """Writes its write_revision call as <tool_call> text (as small local models do), cut off at the
    call's max_tokens (characters // 4, like the fakes) with finish_reason "length", and parsed the way
    LocalModel parses it. The call is `chars` characters long."""

    provider, name = "stub", "stub/long-winded"

    def __init__(self, chars: int):
        self.chars, self.calls = chars, []

    def generate(self, messages, tools, settings):
        self.calls.append((list(messages), settings))
        call = {"name": "write_revision", "arguments": {"changes": {"routing.limits.max_turns": 16},
                "cause": "turn limit", "fixes": [], "keeps": [], "rationale": ""}}
        call["arguments"]["rationale"] = "x" * (self.chars - len(json.dumps(call)))
        text, limit = f"<tool_call>{json.dumps(call)}</tool_call>", settings.max_tokens * 4
        reply = ModelResponse(message=Message(role="assistant", parts=[TextPart(content=text[:limit])]),
                              finish_reason="length" if len(text) > limit else "stop", model=self.name, provider="stub")
        return with_text_calls(reply, tools)


def test_a_call_cut_off_at_max_tokens_is_retried_with_more_room(tmp_path):
    model = LongWinded(chars=3000)  # over 512 tokens' worth, under 1024
    p = LLMProposer(model, profile="compact")
    with Store(tmp_path / "s.duckdb") as s:
        s.insert(TrialResult(trial_id="t-1", run_id="r", benchmark="b", task_id="steps-00", attempt=0,
                             agent="a", status="failed", score=0.0))
        rev = p.propose(MINIMAL, Evidence(s, ["t-1"], "exp"), set())
    assert rev is not None and rev.harness.routing.limits.max_turns == 16
    (first, s1), (second, s2) = model.calls
    assert (s1.max_tokens, s2.max_tokens) == (512, 1024) and s2.temperature == 0.0
    # the partial reply is not shown again; the model is told why nothing ran
    assert len(second) == len(first) + 1 and second[-1].role == "user"
    assert "cut off at 512 output tokens in the middle of a write_revision call" in second[-1].text


def test_a_model_that_always_runs_out_of_tokens_writes_nothing_and_the_room_is_capped(tmp_path):
    model = LongWinded(chars=100_000)
    p = LLMProposer(model, profile="compact", max_turns=5)
    with Store(tmp_path / "s.duckdb") as s:
        s.insert(TrialResult(trial_id="t-1", run_id="r", benchmark="b", task_id="steps-00", attempt=0,
                             agent="a", status="failed", score=0.0))
        assert p.propose(MINIMAL, Evidence(s, ["t-1"], "exp"), set()) is None
    assert [st.max_tokens for _, st in model.calls] == [512, 1024, 2048, 2048, 2048]
    assert [st.temperature for _, st in model.calls] == [0.0, 0.0, 0.7, 0.7, 0.7]  # sampled from the second cut
    assert p.last_run["outcome"] == "max_turns"
    assert not any("xxxx" in m.text for m in model.calls[-1][0] if m.role == "assistant")


def test_cli_refuses_meta_models_it_cannot_build(tmp_path):
    for value, needle in [("llm", "provider/model"), ("smart", "not available"),
                          ("anthropic/claude-opus-4-1", "ANTHROPIC_API_KEY is not set"),
                          ("fake/script:/no/such.yaml", "cannot read fake script")]:
        r = subprocess.run([sys.executable, "-m", "metaopt.cli", "run", "--benchmark", "terminalbench-sample",
                            "--model", "fake/solution", "--meta-model", value, "--db", str(tmp_path / "x.duckdb")],
                           capture_output=True, check=False, text=True, timeout=60)
        assert r.returncode == 2 and "--meta-model" in r.stderr and needle in r.stderr, (value, r.stderr)
        assert "Traceback" not in r.stderr and not (tmp_path / "x.duckdb").exists()


# -- Docker: a real traced store ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def docker_ready(docker_image):
    """Docker and the base image, for every test that uses this."""


def cli(*args: str) -> subprocess.CompletedProcess:
    return metaopt(*args, timeout=600)


@pytest.fixture(scope="module")
def traced(docker_ready, tmp_path_factory):
    """One failing (12 steps, 8 turns) and one passing trial of `minimal` + fake/solution, traced."""
    root = tmp_path_factory.mktemp("traced")
    db = root / "t.duckdb"
    r = cli("eval", "--benchmark", "terminalbench", "--dataset", str(make_tasks(root / "ds", 1, 1)),
            "--model", "fake/solution", "--harness", "minimal", "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    with Store(db, read_only=True) as s:
        rows = {r["status"]: r["trial_id"] for r in s.rows("SELECT trial_id, status FROM trials")}
        [span] = s.rows("SELECT span_id FROM spans WHERE trial_id = ? AND operation_name = 'invoke_agent'",
                        [rows["failed"]])
    return db, rows["failed"], rows["passed"], span["span_id"]


@pytest.mark.usefixtures("docker_image")
def test_tools_show_raw_traces_of_the_evidence_only(traced, tmp_path):
    db, failing, passing, span = traced
    steps = [
        {"tool": "list_failures"},
        {"tool": "read_trial", "arguments": {"trial_id": failing}},
        {"tool": "read_trial", "arguments": {"trial_id": passing}},  # not in the evidence: refused
        {"tool": "read_trial", "arguments": {"trial_id": failing, "offset": 100, "limit": 50}},
        {"tool": "search_traces", "arguments": {"pattern": "echo 5 >>"}},
        {"tool": "search_traces", "arguments": {"pattern": "echo 1 >> /app/out.txt\"}"}},  # the passing trial has it too
        {"tool": "read_harness"},
        {"tool": "write_revision", "arguments": {"harness_yaml": "schema_version: [1", "rationale": "x", "cites": [],
                                                 "cause": "x", "fixes": [], "keeps": []}},
        {"reasoning": "The episode ran out of turns with 4 of 12 lines written.",
         "tool": "write_revision",
         "arguments": {"harness_yaml": more_turns(), "rationale": "episodes hit the 8-turn limit; raise it to 32",
                       "cites": [failing, span], "cause": "turn limit", "fixes": [], "keeps": []}},
        {"text": "never reached"},
    ]
    p = LLMProposer(script(tmp_path, steps))
    with Store(db, read_only=True) as s:
        rev = p.propose(MINIMAL, Evidence(s, [failing], "exp"), set())
    assert rev is not None and rev.harness.routing.limits.max_turns == 32
    assert rev.rationale == "episodes hit the 8-turn limit; raise it to 32"
    assert rev.cites == [failing, span] and rev.usd == 0.0
    assert p.model.unused_steps == [{"text": "never reached"}] and p.last_run["outcome"] == "revision"
    out = [r for m in p.last_run["messages"] if m.role == "tool" for r in m.parts]
    assert len(out) == len(steps) - 2  # the successful write ends the loop before its result is sent
    listed, raw, refused, page, search, search_all, harness, bad_yaml = out
    assert failing in listed.response and passing not in listed.response
    assert "turn_limit" in listed.response and "test_lines" in listed.response
    # the raw transcript: system prompt, the task text, tool calls with arguments, outputs, verifier output
    assert "You are an agent in a Linux container" in raw.response
    assert "Write the numbers 1 to 12" in raw.response
    assert '"command": "echo 8 >> /app/out.txt"' in raw.response and "echo 9" not in raw.response
    assert "exit_code 0" in raw.response and "AssertionError" in raw.response and not raw.is_error
    assert refused.is_error and "not one of the failing training trials" in refused.response
    assert passing not in "".join(r.response for r in out if r is not refused)
    assert page.response.startswith(f"[{failing}: characters 100-150 of ") and "next_offset 150" in page.response
    assert "1 match(es)" in search.response and failing in search.response
    assert "1 match(es)" in search_all.response and passing not in search_all.response
    assert "max_turns: 8" in harness.response and "schema_version: 1" in harness.response
    assert bad_yaml.is_error and "invalid YAML" in bad_yaml.response


@pytest.mark.usefixtures("docker_image")
def test_metaopt_run_with_a_scripted_meta_model(docker_ready, tmp_path):
    """`metaopt run --meta-model fake/script:` runs to the end; the candidate is the llm's."""
    ds = make_tasks(tmp_path / "ds", n_long=5, n_short=1)  # seed 0: train and validation are all 12-step tasks
    meta = script(tmp_path, [
        {"tool": "list_failures"},
        {"tool": "write_revision", "arguments": {
            "harness_yaml": more_turns(), "rationale": "scripted: the agent runs out of turns; raise max_turns to 32",
            "cites": ["not-a-trial"], "cause": "turn limit", "fixes": [], "keeps": []}},
    ])
    db = tmp_path / "r.duckdb"
    r = cli("run", "--benchmark", "terminalbench", "--dataset", str(ds), "--harness", "minimal",
            "--model", "fake/solution", "--meta-model", meta, "--trials", "1", "--split", "0.34,0.33,0.33",
            "--max-iterations", "1", "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    with Store(db, read_only=True) as s:
        cands = s.rows("SELECT iteration, status, proposer, rationale, evidence, diff FROM candidates ORDER BY iteration")
        meta_rows = s.rows("SELECT usd FROM budget_ledger WHERE kind = 'meta'")
        stages = [d["stage"] for d in s.rows("SELECT stage FROM gate_decisions ORDER BY decided_at")]
    assert [c["iteration"] for c in cands] == [0, 1]
    c = cands[1]
    assert c["proposer"] == "llm"
    assert c["rationale"] == "scripted: the agent runs out of turns; raise max_turns to 32"
    assert json.loads(c["evidence"]) == []  # its only cite was made up
    assert "+   \"max_turns\": 32," in c["diff"] and "temperature" not in c["diff"]  # the diff shows the change only
    # it went through the guard, smoke, screen, the staged gate's looks (K = 1 keeps it from accepting)
    # and the closing verdict row
    assert stages[0] == "screen" and stages[1] == "select" and set(stages[1:-1]) <= {"select", "confirm"}
    assert stages[-1] == "verdict"
    assert c["status"] in ("accepted", "inconclusive") and out["stop_reason"] == "max iterations (1) reached"
    assert meta_rows == [{"usd": 0.0}]
