"""The bilevel strategy in the real loop, in process on LocalSandbox (real sandboxes, store, traces;
mechanism hosts as sandboxed child processes). One scripted meta-model writes the proposals and
holds the Level-2 sessions, as `--meta-model fake/script:...` does."""

from __future__ import annotations

import json

import pytest
from _bilevel_helpers import (
    BREAKS_LATER,
    MINIMAL,
    PROMPT_TABU,
    level2_steps,
    prompt_revision,
    spec,
    stair_tasks,
    turns_revision,
    with_turns,
    write_script,
)
from _shared_runs import ui_server

from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import find_experiment, plan_experiment, resume_experiment, start_experiment
from metaopt.meta_agent.records import Candidate, GateDecision
from metaopt.meta_agent.search.bilevel import judge
from metaopt.meta_agent.search.bilevel.config import BilevelConfig
from metaopt.meta_agent.search.bilevel.records import (
    ActiveSet,
    HookCall,
    Judgement,
    Level2Session,
    MechanismCheck,
    MechanismRow,
    SearchParams,
)
from metaopt.meta_agent.search.mechanisms import source_hash
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

SEED = 9  # train: 12, 24, 24, 1 steps; validation: 12, 12, 12, 1 (see stair_tasks)


@pytest.fixture(scope="module")
def backend(local_backend):
    return local_backend


def config(meta_model: str, **bilevel) -> RunConfig:
    return RunConfig(benchmark="local-stairs", model="fake/solution", meta_model=meta_model, trials=1, seed=SEED,
                     split=(0.34, 0.33, 0.33), max_iterations=7, plateau=20, concurrency=2, strategy="bilevel",
                     bilevel=BilevelConfig(**{"builtins": [], "level2_every": 2, "window": 1, "judge_pairs": 1,
                                              "host": "process", "max_explore_rate": 0.0, **bilevel}))


def run(cfg: RunConfig, tasks, store, backend, **kw):
    tracing = Tracing.for_store(store)
    try:
        exp = start_experiment(plan_experiment(cfg, "minimal", tasks), store=store, backend=backend, tracing=tracing,
                               **kw)
        return exp, exp.run()
    finally:
        tracing.shutdown()


def script(tmp_path) -> tuple[str, str]:
    """Proposals and three Level-2 sessions in the order the loop asks for them. Returns (model, the
    good mechanism's hash). The good mechanism's trial (iterations 3 and 4, one on, one off, in the
    order the seed draws) gets the accepted turn-limit raise in its "on" window."""
    good = PROMPT_TABU.strip() + "\n"
    order = judge.plan(3, 1, 1, SEED, source_hash(good))["order"]
    h16 = with_turns(16)
    on, off = turns_revision(16), prompt_revision(3, base=h16 if order[0] == "on" else MINIMAL)
    steps = [prompt_revision(1), prompt_revision(2),
             *level2_steps(spec("prompt_tabu", ["on_result", "guidance", "filter", "state_dict", "load_state_dict"]),
                           PROMPT_TABU),
             *((on, off) if order[0] == "on" else (off, on)),
             *level2_steps(spec("late_crash", ["on_result", "guidance", "state_dict", "load_state_dict"]), BREAKS_LATER),
             prompt_revision(5, base=h16), turns_revision(32, base=h16),
             *level2_steps("Here is the spec: {name: prompt_guard}", None)[:3], {"text": "{\"name\": \"x\"}"},
             prompt_revision(7, base=h16)]
    return write_script(tmp_path / "meta.yaml", steps), source_hash(good)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory, backend):
    """One scripted bilevel experiment (7 iterations, three Level-2 sessions), read by the tests below."""
    tmp = tmp_path_factory.mktemp("scenario")
    meta, good = script(tmp)
    with Store(tmp / "s.duckdb") as store:
        exp, out = run(config(meta), stair_tasks(tmp / "tasks"), store, backend)
        rows = {"sessions": store.select(Level2Session, "true", order="round"),
                "mechs": {m.name: m for m in store.select(MechanismRow, "true")},
                "checks": store.select(MechanismCheck, "mechanism_hash = ?", [good], order="checked_at"),
                "calls": store.select(HookCall, "true", order="called_at"),
                "judged": {j.mechanism_hash: j for j in store.select(Judgement, "true")},
                "sets": store.select(ActiveSet, "true", order="changed_at"),
                "cands": store.select(Candidate, "experiment_id = ?", [exp.id], order="iteration"),
                "gates": store.select(GateDecision, "experiment_id = ?", [exp.id]),
                "trials_of": {r["candidate_id"]: r["n"] for r in store.rows(
                    "SELECT candidate_id, count(*) AS n FROM trials GROUP BY 1")}}
    return {"db": tmp / "s.duckdb", "exp": exp, "out": out, "good": good, "model": exp.proposer.model, **rows}


def test_level_2_is_one_conversation_per_round_and_a_bad_spec_is_an_error_row(scenario):
    model, sessions = scenario["model"], scenario["sessions"]
    # the script was followed to the end: every proposal and every session happened where planned
    assert model.unused_steps == [] and model.overrun == 0
    assert find_experiment(scenario["db"], scenario["exp"].id).status == "finished"
    assert [s.outcome for s in sessions] == ["module", "module", "spec_error"]
    assert "not a JSON object" in sessions[2].errors[0] and len(sessions[2].errors) == 2  # one repair, then an error row
    assert sessions[2].spec is None and sessions[2].mechanism_hash is None  # no default spec, no module
    # one conversation: the Specify turn saw Explore and Critique, and the protocol's source
    texts = [m["text"] for m in sessions[0].messages]
    assert "class Mechanism" in texts[0] and "Step 1 of 4: Explore" in texts[1] and "Step 3 of 4" in texts[5]
    assert "prompt note 1" in texts[1] and "gate screen: fail" in texts[1]  # the record: rationales, gate rows


def test_a_generated_mechanism_climbs_the_ladder_and_its_guidance_reaches_the_next_proposal(scenario):
    checks, calls, good, cands = scenario["checks"], scenario["calls"], scenario["good"], scenario["cands"]
    assert [(c.step, c.ok) for c in checks] == [("parse", True), ("imports", True), ("contract", True),
                                                ("dry_run", True)]
    effects = checks[-1].detail["effects"]
    assert any("guidance reached the proposer's prompt" in e for e in effects)
    assert any("filter would drop" in e for e in effects)
    assert "user nobody" in checks[2].detail["isolation"]
    # live: its guidance is in the next proposal's transcript (the fake model got it), proven row by row
    shown = [c for c in calls if c.mechanism_hash == good and c.hook == "guidance" and c.effect
             and "found in its transcript" in c.effect]
    assert shown
    prompts = [m.text for call in scenario["model"].calls for m in call.messages if m.role == "user"]
    assert any("PROMPT-TABU: " in p and "Search guidance" in p for p in prompts)
    dropped = [c for c in cands if c.status == "invalid" and "dropped before any trial" in (c.status_reason or "")]
    assert dropped and {g.stage for g in scenario["gates"] if g.candidate_id == dropped[0].candidate_id} == {"filter"}
    assert scenario["trials_of"].get(dropped[0].candidate_id, 0) == 0
    assert [c for c in cands if good in c.mechanisms], "no candidate records the good mechanism in its active set"


def test_a_generated_mechanism_is_judged_on_gain_per_trial_in_paired_windows(scenario):
    j, mechs = scenario["judged"][scenario["good"]], scenario["mechs"]
    # the accepted raise fell in its "on" window -> kept
    assert j.outcome == "keep" and j.n_pairs == 1 and mechs["prompt_tabu"].status == "kept"
    assert {w["phase"] for w in j.windows} == {"on", "off"} and "per trial" in j.reason
    assert "paired" in j.rule and j.mean_diff > 0


def test_a_crash_in_generated_code_switches_it_off_rolls_it_back_and_the_run_goes_on(scenario):
    mechs, calls, sets, cands = scenario["mechs"], scenario["calls"], scenario["sets"], scenario["cands"]
    bad = mechs["late_crash"]
    assert bad.status == "off" and "IndexError" in bad.status_reason
    judged = scenario["judged"][bad.mechanism_hash]
    assert judged.outcome == "roll_back" and "switched off before its judgement" in judged.reason
    crash = [c for c in calls if c.mechanism_hash == bad.mechanism_hash and c.status == "raised"]
    assert crash and crash[0].hook == "on_result"
    back = [s for s in sets if bad.mechanism_hash not in s.hashes and "late_crash off" in s.reason]
    assert back and "back to the set of iteration" in back[-1].reason
    assert all(bad.mechanism_hash not in c.mechanisms for c in cands if c.iteration > crash[0].iteration)
    # the experiment went on after the crash: iterations 6 and 7 ran, the test split was read
    assert max(c.iteration for c in cands) == 7 and scenario["out"].best_test_score is not None
    assert scenario["out"].bilevel["level2_sessions"] == 3


def test_the_explorer_and_the_terminal_show_source_ladder_calls_and_judgement(scenario):
    import subprocess
    import sys

    from metaopt.explorer.mechanisms import mechanisms

    with Store(scenario["db"], read_only=True) as store:
        view = mechanisms(store, scenario["exp"].id)
    m = next(x for x in view["mechanisms"] if x["name"] == "prompt_tabu")
    assert "class Mechanism" in m["source"] and [c["step"] for c in m["checks"]][-1] == "dry_run"
    assert m["judgement"]["outcome"] == "keep" and m["calls"]["guidance ok"] >= 1
    assert any(c["effect"] and "found in its transcript" in c["effect"] for c in view["calls"])
    r = subprocess.run([sys.executable, "-m", "metaopt.cli", "traces", "mechanisms", scenario["exp"].id, "--db",
                        str(scenario["db"]), "--json"], capture_output=True, check=False, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mechanisms"][0]["source"] == view["mechanisms"][0]["source"]
    bad = subprocess.run([sys.executable, "-m", "metaopt.cli", "traces", "mechanisms", "exp-nope", "--db",
                          str(scenario["db"])], capture_output=True, check=False, text=True, timeout=120)
    assert bad.returncode == 2 and "no experiment 'exp-nope'" in bad.stderr


def test_heuristic_meta_model_uses_level_15_and_the_builtins_only(tmp_path, backend):
    tasks = stair_tasks(tmp_path / "tasks")
    with Store(tmp_path / "s.duckdb") as store:
        _exp, out = run(config("heuristic", builtins=["tabu", "bandit", "explore"], level15_every=1), tasks, store,
                       backend, on_event=(said := []).append)
        calls = store.select(HookCall, "true")
        params = store.select(SearchParams, "true")
    assert any("Level 2 off: the meta-model is 'heuristic'" in line for line in said)
    assert {c.mechanism for c in calls} >= {"tabu", "bandit", "explore"}
    assert any(c.effect == "not shown: the heuristic proposer takes no text" for c in calls if c.hook == "guidance")
    assert params, "Level 1.5 wrote no search parameters"
    assert not [c for c in calls if c.status != "ok"]
    assert out.bilevel["level2_sessions"] == 0


def test_a_resumed_bilevel_experiment_restores_mechanism_state_and_search_params(tmp_path, backend):
    meta, good = script(tmp_path)
    tasks = stair_tasks(tmp_path / "tasks")
    db = tmp_path / "s.duckdb"
    seen: list[str] = []

    def stop_in_iteration_4(r):
        seen.append(r.trial_id)
        if "/c4:" in r.trial_id:
            raise KeyboardInterrupt

    with Store(db) as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(config(meta), "minimal", tasks), store=store, backend=backend,
                               tracing=tracing, on_trial=stop_in_iteration_4)
        with pytest.raises(KeyboardInterrupt):
            exp.run()
        tracing.shutdown()
        before = store.select(MechanismRow, "mechanism_hash = ?", [good])[0]
    assert before.status == "on_trial"
    # the resumed run gets the rest of the script: the model of a new process starts at step 0
    steps = __import__("yaml").safe_load((tmp_path / "meta.yaml").read_text())
    rest = tmp_path / "rest.yaml"
    rest.write_text(__import__("yaml").safe_dump(steps[8:]))  # after c1, c2, session 1, c3's and c4's proposals
    with Store(db) as store:
        store.con.execute("UPDATE experiments SET config = json_merge_patch(config, ?) WHERE experiment_id = ?",
                          [json.dumps({"run": {"meta_model": f"fake/script:{rest}"}}), exp.id])
    record = find_experiment(db, exp.id)
    with Store(db) as store:
        tracing = Tracing.for_store(store)
        resume_experiment(record, store=store, tasks=tasks, backend=backend, tracing=tracing).run()
        tracing.shutdown()
        restored = store.select(HookCall, "mechanism_hash = ? AND hook = 'load_state_dict'", [good])
        after = store.select(MechanismRow, "mechanism_hash = ?", [good])[0]
    assert restored and restored[0].status == "ok" and restored[0].effect == "state restored on resume"
    assert after.status in ("kept", "rolled_back")


def test_the_mechanisms_page_renders_in_a_browser(scenario, page):
    with ui_server("--db", str(scenario["db"])) as base:
        page.goto(f"{base}#/experiment?id={scenario['exp'].id}")
        page.click("text=search mechanisms")
        page.wait_for_selector("text=Hook calls (newest first)")
        text = page.inner_text("main")
    for needle in ("prompt_tabu", "late_crash", "dry_run", "judgement: keep", "IndexError", "found in its transcript",
                   "Active set over time", "round 3 at iteration 7: spec_error"):
        assert needle in text, needle
