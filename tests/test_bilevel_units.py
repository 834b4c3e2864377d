"""Pure parts of the bilevel strategy: what a revision changed, Level 1.5's rules, the judgement
rule, and the Level-2 conversation (one message list; a spec that does not parse is an error,
never a default; a refused module gets one repair turn)."""

from __future__ import annotations

import json

import pytest
from _bilevel_helpers import MINIMAL, PROMPT_TABU, level2_steps, spec, with_turns

from metaopt.meta_agent.search.bilevel import judge, level15
from metaopt.meta_agent.search.bilevel.areas import changes
from metaopt.meta_agent.search.bilevel.generate import static_steps
from metaopt.meta_agent.search.bilevel.level2 import extract_code, parse_spec, run_session
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.models.fake import ScriptModel

LLM = {"name": "llm", "takes_guidance": True, "areas": ["prompts", "tools", "routing", "limits"]}


def test_changes_name_the_fields_and_their_areas():
    d = MINIMAL.model_dump(mode="json")
    d["prompts"]["system"] += " more"
    d["tools"][0]["timeout_s"] = 30
    d["tools"][0]["description"] = "Run bash."
    d["tools"].append({"name": "grep", "kind": "shell", "description": "grep", "template": "grep -r x ."})
    areas, kinds = changes(MINIMAL, Harness.model_validate(d))
    assert kinds == ["prompts.system", "tools.bash.description", "tools.bash.timeout_s", "tools.grep"]
    assert areas == ["limits", "prompts", "tools"]
    assert changes(MINIMAL, with_turns(16)) == (["limits"], ["routing.limits.max_turns"])


def cand(i, status, areas, parent="c0"):
    return {"id": f"c{i}", "parent_id": parent, "iteration": i, "status": status, "areas": areas,
            "val_mean": None, "trials": 5}


def test_level_15_freezes_an_area_after_three_fruitless_proposals_but_never_the_last_one():
    hist = [cand(0, "baseline", [], None)] + [cand(i, "rejected", ["prompts"]) for i in (1, 2, 3)]
    p, why = level15.adjust(level15.initial(), hist, 4, 3, ["prompts", "limits"])
    assert p["freeze"] == {"prompts": 10} and "prompts frozen until iteration 10" in why
    assert p["explore_rate"] == 0.15 and "Frozen for now" in p["guidance"]
    assert level15.public(p, 4)["freeze"] == ["prompts"] and level15.public(p, 10)["freeze"] == []
    p2, why2 = level15.adjust(level15.initial(), hist, 4, 3, ["prompts"])
    assert p2["freeze"] == {} and "last area the proposer can change" in why2
    p3, _ = level15.adjust(p, hist + [cand(4, "accepted", ["limits"])], 5, 3, ["prompts", "limits"])
    assert p3["explore_rate"] == 0.0 and p3["favour"][0] == "limits"
    p4, why4 = level15.adjust(p, hist, 11, 3, ["prompts", "limits"], max_rate=0.0)
    assert "prompts unfrozen" in why4 and p4["explore_rate"] == 0.15  # capped: no further rise


def window(phase, pair, gain, trials):
    return {"phase": phase, "pair": pair, "gain": gain, "trials": trials, "rate": gain / trials}


def test_the_judgement_rule():
    on_better = [window("on", 0, 0.5, 10), window("off", 0, 0.0, 10)]
    assert judge.judge(on_better[:1], 2).outcome == "continue"
    assert judge.judge(on_better, 2).outcome == "continue"  # one pair of two: wait
    v = judge.judge(on_better, 1)
    assert v.outcome == "keep" and "not significant" in v.reason and v.ci_low is None
    both = on_better + [window("off", 1, 0.0, 10), window("on", 1, 0.6, 10)]
    v = judge.judge(both, 2)
    assert v.outcome == "keep" and v.ci_low > 0 and "faster search" in v.reason
    worse = [window("on", 0, 0, 10), window("off", 0, 0.5, 10), window("on", 1, 0, 10), window("off", 1, 0.4, 10)]
    assert judge.judge(worse, 4).outcome == "roll_back"
    flat = [window("on", 0, 0, 10), window("off", 0, 0, 10)]
    assert judge.judge(flat, 1).outcome == "roll_back"  # no gain: a mechanism must pay for itself
    assert judge.judge([], 1, final=True).outcome == "undecided"


def test_windows_measure_gain_per_trial_from_the_record():
    p = {"start": 2, "window": 1, "order": ["on", "off"]}
    hist = [{"id": "c0", "iteration": 0, "status": "baseline", "val_delta": None, "trials": 8},
            {"id": "c1", "iteration": 1, "status": "rejected", "val_delta": None, "trials": 3},
            {"id": "c2", "iteration": 2, "status": "accepted", "val_delta": 0.4, "trials": 10},
            {"id": "c3", "iteration": 3, "status": "rejected", "val_delta": 0.1, "trials": 5}]
    assert judge.windows(p, hist, 3) == [{"phase": "on", "pair": 0, "iterations": [2], "gain": pytest.approx(0.4),
                                          "trials": 10, "rate": pytest.approx(0.04)}]
    assert [w["rate"] for w in judge.windows(p, hist, 4)] == [pytest.approx(0.04), 0.0]
    assert judge.phase(p, 1) is None and judge.phase(p, 3) == "off" and judge.end(p) == 4


def test_a_spec_parses_only_when_it_is_the_object_asked_for():
    good = spec("prompt_tabu", ["on_result", "guidance", "state_dict", "load_state_dict"])
    assert parse_spec(json.dumps(good)).name == "prompt_tabu"
    assert parse_spec("```json\n" + json.dumps(good) + "\n```").name == "prompt_tabu"
    assert parse_spec(json.dumps({**good, "state": {"rejected": "a count"}})).state == {"rejected": "a count"}
    for bad, why in [("I think a tabu list", "not a JSON object"), ("[1, 2]", "must be a JSON object"),
                     (json.dumps({**good, "extra": 1}), "extra: Extra inputs are not permitted"),
                     (json.dumps({**good, "hooks": {"guidance": "x"}}), "missing required hooks"),
                     (json.dumps({**good, "name": "Tabu List"}), "name: Value error, must match"),
                     (json.dumps({**good, "name": "tabu"}), "is a built-in mechanism's name")]:
        with pytest.raises(ValueError, match=why):
            parse_spec(bad)
    with pytest.raises(ValueError, match="exactly one ```python block, it holds 0"):
        extract_code("class Mechanism: ...")


def test_one_conversation_each_step_sees_the_ones_before():
    model = ScriptModel(level2_steps(spec("prompt_tabu", ["on_result", "guidance", "filter", "state_dict",
                                                         "load_state_dict"]), PROMPT_TABU))
    s = run_session(model, "RECORD-TEXT", LLM, static_steps)
    assert s.outcome == "module" and "class Mechanism:" in s.source and s.errors == []
    lens = [len(c.messages) for c in model.calls]
    assert lens == [2, 4, 6, 8]  # one growing message list: system + every earlier turn
    assert "RECORD-TEXT" in model.calls[3].messages[1].text and "class Mechanism:" in model.calls[0].messages[0].text


def test_a_spec_that_does_not_parse_ends_the_session_as_an_error_after_one_repair():
    model = ScriptModel(level2_steps("tabu over prompts, please", None) + [{"text": "still not json"}])
    s = run_session(model, "R", LLM, static_steps)
    assert s.outcome == "spec_error" and s.spec is None and s.source is None
    assert len(s.errors) == 2 and all("not a JSON object" in e for e in s.errors)
    assert "Your spec was refused" in model.calls[-1].messages[-1].text and model.unused_steps == []


def test_a_refused_module_gets_one_repair_turn_in_the_same_conversation():
    broken = PROMPT_TABU.replace("def guidance(self, ctx):", "def guidance(self, ctx)")
    steps = level2_steps(spec("prompt_tabu", ["on_result", "guidance", "filter", "state_dict", "load_state_dict"]),
                         broken) + [{"text": "```python\n" + PROMPT_TABU + "```"}]
    model = ScriptModel(steps)
    s = run_session(model, "R", LLM, static_steps)
    assert s.outcome == "module" and len(s.attempts) == 2
    assert not s.attempts[0][1][0].ok and "syntax error" in s.errors[0]
    assert "refused at the parse step" in model.calls[-1].messages[-1].text
    # a module that compiles but is not what the spec said is refused too (name / optional hooks)
    other = level2_steps(spec("other_name", ["on_result", "guidance", "state_dict", "load_state_dict"]), PROMPT_TABU)
    s = run_session(ScriptModel(other + [{"text": "```python\n" + PROMPT_TABU + "```"}]), "R", LLM, static_steps)
    assert s.outcome == "code_error" and "spec names 'other_name'" in s.errors[-1]


def test_a_failing_meta_model_ends_the_session_not_the_run():
    class Down:
        name = "fake/down"

        def generate(self, *a, **k):
            raise ConnectionError("no route to the model")

    s = run_session(Down(), "R", LLM, static_steps)
    assert s.outcome == "model_error" and "no route to the model" in s.errors[0]
