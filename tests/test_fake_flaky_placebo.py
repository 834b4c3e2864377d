"""`fake/flaky:P` (real noise, no signal) and the `placebo` proposer (a change that cannot matter):
the two halves of a null experiment."""

from __future__ import annotations

import pytest

from metaopt.benchmarks.registry import load_benchmark
from metaopt.meta_agent.guard import Guard
from metaopt.meta_agent.proposers import get_proposer
from metaopt.task_agent.harness_io import load_harness, resolve_harness
from metaopt.task_agent.messages import Message, ModelSettings, ToolSpec
from metaopt.task_agent.models import ModelConfigError, get_model
from metaopt.task_agent.models.fake import FlakyModel, flaky_replays, needs_task

S = ModelSettings(model="fake/x")
BASH = ToolSpec(name="bash", description="Run a command.",
                parameters={"type": "object", "properties": {"command": {"type": "string"}}})
FINISH = ToolSpec(name="finish", description="Stop.")
HISTORY = [Message.system("You are an agent."), Message.user("Do the task.")]


def flaky(p: float, trial_id: str, staged: list[int] | None = None) -> FlakyModel:
    def stage() -> list[str]:
        if staged is not None:
            staged.append(1)
        return ["cd /app", "make"]
    return get_model(f"fake/flaky:{p}", context={"trial_id": trial_id, "stage_solution": stage})


def test_flaky_replays_or_does_nothing_by_trial_id():
    ids = [f"exp/c1:validation/task-{i}/0" for i in range(200)]
    replaying = [t for t in ids if flaky_replays(0.5, t)]
    doing_nothing = [t for t in ids if not flaky_replays(0.5, t)]
    assert replaying and doing_nothing
    staged: list[int] = []
    m = flaky(0.5, replaying[0], staged)
    assert m.replays and staged == [1] and m.name == "fake/flaky:0.5"
    calls = [m.generate(HISTORY, [BASH, FINISH], S).message for _ in range(4)]
    assert [c.tool_calls[0].arguments.get("command") for c in calls[:2]] == ["cd /app", "make"]
    assert calls[2].tool_calls[0].name == "finish" and calls[3].text == "Done."
    staged.clear()
    m = flaky(0.5, doing_nothing[0], staged)
    assert not m.replays and staged == []  # a trial that does nothing never sees the solution's files
    r = m.generate(HISTORY, [BASH, FINISH], S)
    assert r.message.text == "I will do nothing." and not r.message.tool_calls and r.finish_reason == "stop"


def test_flaky_is_reproducible_and_its_rate_is_close_to_p():
    ids = [f"exp-20260101-000000-abcd/c{c}:validation/t{t}/{a}" for c in range(10) for t in range(50) for a in range(4)]
    for p in (0.1, 0.5, 0.9):
        rate = sum(flaky_replays(p, t) for t in ids) / len(ids)
        assert abs(rate - p) < 4 * (p * (1 - p) / len(ids)) ** 0.5  # 2,000 ids: within 4 SE
    assert [flaky_replays(0.5, t) for t in ids] == [flaky_replays(0.5, t) for t in ids]
    assert [flaky(0.5, t).replays for t in ids[:50]] == [flaky_replays(0.5, t) for t in ids[:50]]
    # Coupled across P: a trial that replays at 0.3 replays at 0.6; P = 0 never, P = 1 always.
    assert all(flaky_replays(0.6, t) for t in ids if flaky_replays(0.3, t))
    assert not any(flaky_replays(0.0, t) for t in ids) and all(flaky_replays(1.0, t) for t in ids)


@pytest.mark.parametrize("name", ["fake/flaky:", "fake/flaky:1.5", "fake/flaky:-0.1", "fake/flaky:half", "fake/flaky:nan"])
def test_flaky_rejects_a_bad_probability(name):
    with pytest.raises(ModelConfigError, match="P must be a number between 0 and 1"):
        needs_task(name)
    with pytest.raises(ModelConfigError, match="between 0 and 1"):
        get_model(name, context={"trial_id": "x", "stage_solution": list})


def test_flaky_needs_the_trial_and_the_solution():
    with pytest.raises(ModelConfigError, match="trial_id"):
        get_model("fake/flaky:0.5")
    with pytest.raises(ModelConfigError, match="stage_solution"):
        get_model("fake/flaky:0.5", context={"trial_id": "t"})
    assert needs_task("fake/flaky:0.25") and needs_task("fake/solution")
    assert not needs_task("fake/nop") and not needs_task("anthropic/claude-x")


def test_flaky_ignores_the_harness():
    """Whatever the system prompt and tools say, the same trial id gives the same moves."""
    tid = next(f"t{i}" for i in range(100) if flaky_replays(0.5, f"t{i}"))
    a = flaky(0.5, tid).generate([Message.system("Be brief."), Message.user("x")], [BASH], S)
    b = flaky(0.5, tid).generate([Message.system("Think for a long time first."), Message.user("y")], [BASH], S)
    assert a.message.tool_calls == b.message.tool_calls


def _sample():
    tasks = [t for t in load_benchmark("terminalbench-sample") if hasattr(t, "instruction")]
    return load_harness(resolve_harness("baseline")), Guard(tasks)


def test_placebo_appends_a_different_neutral_sentence_each_time():
    parent, guard = _sample()
    placebo = get_proposer("placebo")
    assert placebo.name == "placebo"
    tried: set[str] = {parent.content_hash()}
    system_prompts = []
    child = parent
    for _ in range(12):  # past the list of sentences: numbered repeats keep them distinct
        rev = placebo.propose(child, None, tried)
        assert rev is not None and rev.harness.content_hash() not in tried
        assert rev.rationale.startswith("placebo: appended neutral sentence")
        new = rev.harness
        assert new.prompts.system.startswith(child.prompts.system + "\n\n")
        added = new.prompts.system[len(child.prompts.system) + 2:]
        assert added and "\n" not in added and added not in system_prompts
        # Nothing but the system prompt changed, and the diff guard lets it through.
        assert new.model_dump(exclude={"prompts"}) == child.model_dump(exclude={"prompts"})
        assert new.prompts.model_dump(exclude={"system"}) == child.prompts.model_dump(exclude={"system"})
        assert guard.check(child, new) is None
        system_prompts.append(added)
        tried.add(new.content_hash())
        child = new  # a greedy chain that accepted it
    # From the same parent twice, it skips what was tried instead of repeating itself.
    first = placebo.propose(parent, None, {parent.content_hash()})
    second = placebo.propose(parent, None, {parent.content_hash(), first.harness.content_hash()})
    assert first.harness.prompts.system != second.harness.prompts.system


@pytest.mark.parametrize("command", ["run", "eval"])
def test_a_bad_flaky_probability_is_one_line_exit_2_before_anything_runs(tmp_path, command):
    from _docker_fixtures import metaopt

    extra = ["--meta-model", "placebo"] if command == "run" else []
    r = metaopt(command, "--benchmark", "terminalbench-sample", "--model", "fake/flaky:1.5", *extra,
                "--db", str(tmp_path / "x.duckdb"))
    assert r.returncode == 2, r.stderr
    assert "--model" in r.stderr and "between 0 and 1" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.duckdb").exists()
