"""The meta-agent's memory, offline: prediction checks, structured edits, liveness over real spans,
history records, and the heuristic proposer that reads them.

Spans here are made by the real tracing path (traces.tracing / traces.instrument, the DuckDB
exporter) around a scripted fake model, as the task agent's are; trials and candidates are real
store rows written by the ledger."""

from __future__ import annotations

import pytest
import yaml
from _memory_helpers import EXP, MINIMAL, edit, episode, trial

from metaopt.meta_agent.ledger import Ledger
from metaopt.meta_agent.liveness import measure
from metaopt.meta_agent.predictions import Manifest, check
from metaopt.meta_agent.proposers import Evidence
from metaopt.meta_agent.proposers import history as hist
from metaopt.meta_agent.proposers.edits import Draft, EditError
from metaopt.meta_agent.proposers.heuristic import Cause, HeuristicProposer, knob
from metaopt.traces.instrument import prompt_sha256
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing


# -- predictions -------------------------------------------------------------------------------------
def test_prediction_check_hits_misses_breaks_and_surprises():
    parent = {"a": [0, 0], "b": [0, 1], "c": [1, 1], "d": [1, 1], "e": [0, 0], "f": [None]}
    child = {"a": [1, 1], "b": [0, 1], "c": [1, 0], "d": [1, 1], "e": [1, 1]}
    m = Manifest(cause="turn limit", fixes=["a", "b", "f"], keeps=["c", "d"])
    r = check(m, parent, child)
    assert (r.hits, r.misses, r.unchecked) == (["a"], ["b"], ["f"])
    assert (r.kept, r.broken) == (["d"], ["c"])
    assert r.unexpected_fixes == ["e"] and r.unexpected_breaks == []
    assert r.verdict == "partly" and "1/3 predicted fixes pass" in r.summary and "1/2 listed keeps broke" in r.summary
    assert check(Manifest(cause="x", fixes=["a"]), parent, child).verdict == "as_claimed"
    assert check(Manifest(cause="x", fixes=["b"], keeps=["c"]), parent, child).verdict == "not_as_claimed"
    assert check(Manifest(cause="x", fixes=["f"]), parent, child).verdict == "unchecked"
    # errored trials are left out, as the gate leaves them out
    assert check(Manifest(cause="x", fixes=["a"]), parent, {"a": [None, 1]}).hits == ["a"]


# -- structured edits ------------------------------------------------------------------------------------
def test_edits_apply_one_validated_step_at_a_time():
    d = Draft(MINIMAL)
    assert d.set_field("routing.limits.max_turns", 16).startswith("ok: routing.limits.max_turns: 8 -> 16")
    d.set_field("tools.bash.timeout_s", 60)
    d.edit_prompt("system", "Run long jobs in the background.", section="Long jobs")
    d.edit_prompt("system", "Use nohup and poll the log.", section="Long jobs")  # replaces the section body
    d.set_tool("grep", kind="shell", description="Search files.", template="grep -rn {pattern} .",
               parameters={"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]})
    before = dict(d.data)
    for bad, needle in [(lambda: d.set_field("routing.limit.max_turns", 3), "fields here: start_role"),
                        (lambda: d.set_field("routing.limits.max_turns", 0), "greater than 0"),
                        (lambda: d.set_field("tools.nope.timeout_s", 3), "names: bash, finish, grep"),
                        (lambda: d.set_field("model.temperature", 0.0), "frozen"),
                        (lambda: d.set_tool("broken", kind="shell", description="x"), "template is required"),
                        (lambda: d.edit_prompt("system", "x", old="not in the prompt"), "occurs 0 times"),
                        (lambda: d.remove_tool("nope"), "no tool 'nope'")]:
        with pytest.raises(EditError, match=needle):
            bad()
        assert d.data == before  # a failed edit leaves the draft as it was
    h = d.harness()
    assert h.routing.limits.max_turns == 16 and h.tools[0].timeout_s == 60 and h.tools[-1].name == "grep"
    assert h.prompts.system.count("## Long jobs") == 1 and h.prompts.system.endswith("Use nohup and poll the log.")
    assert Draft(MINIMAL, allow_model_changes=True).set_field("model.temperature", 0.0).startswith("ok")


def test_small_model_edits_a_wrapped_value_and_a_bare_properties_map_are_read_as_meant():
    """The local 1.5B wrote changes={"tools.bash.template": {"value": "{command!raw}"}}."""
    d = Draft(MINIMAL)
    assert d.set_field("tools.bash.template", {"value": "cd /app && {command!raw}"}).startswith("ok")
    assert d.harness().tools[0].template == "cd /app && {command!raw}"
    with pytest.raises(EditError, match="valid string"):  # the original error when neither applies
        d.set_field("tools.bash.template", {"value": 3})
    d.set_field("tools.sh", {"kind": "shell", "description": "Run it.", "template": "{cmd!raw}",
                             "parameters": {"cmd": {"type": "string"}}})  # a bare properties map
    assert d.harness().tools[-1].parameters == {"type": "object", "properties": {"cmd": {"type": "string"}},
                                                "required": ["cmd"]}


def test_lowering_a_limit_is_applied_with_a_note_raising_it_is_not():
    d = Draft(MINIMAL)
    lowered = d.set_field("routing.limits.max_turns", 4)
    assert lowered.startswith("ok: routing.limits.max_turns: 8 -> 4") and "lowers a limit" in lowered
    assert d.harness().routing.limits.max_turns == 4
    assert "lowers" not in d.set_field("routing.limits.max_turns", 24)
    assert "lowers" not in d.set_field("prompts.system", "Be brief.")

    for path, high in (("tools.bash.timeout_s", 900.0), ("tools.bash.output_limit", 80_000)):  # above the caps
        h = edit(MINIMAL, **{path.replace(".", "__"): high})
        cause = Cause("timeout" if path.endswith("_s") else "truncated", 1, [], "bash", ["t"], None)
        assert knob(h, cause) is None  # the heuristic turns a knob up, never down to its cap

# -- a store with real spans -----------------------------------------------------------------------------
@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "m.duckdb") as s:
        yield s


def test_liveness_reads_what_ran_from_the_spans(store):
    tracing = Tracing.for_store(store)
    bash = [("bash", "ok", {"exit_code": 0, "duration_s": 12.0, "output_chars": 400, "truncated": False})] * 9
    child = edit(MINIMAL, routing__limits__max_turns=16)
    episode(store, tracing, child, "v1", "t1", "c1", "validation", bash, "finished", 1.0)
    episode(store, tracing, child, "v2", "t2", "c1", "validation", bash[:2], "finished", 1.0)
    episode(store, tracing, MINIMAL, "p1", "t1", "c0", "validation", bash[:8], "turn_limit", 0.0)
    tracing.shutdown()

    turns = measure(store, MINIMAL, child, ["v1", "v2"], ["p1"], "validation")
    assert turns.live is True and "1 of 2 episode(s) made more than 8 model calls" in turns.reason
    # a tool no task calls: dead, with the reason
    unused = child.model_copy(update={"tools": [*child.tools, child.tools[0].model_copy(update={"name": "grep"})]})
    dead = measure(store, child, unused, ["v1", "v2"], ["v1", "v2"], "validation")
    assert dead.live is False and "tools.grep added" in dead.reason and "never called grep" in dead.reason
    # a prompt change reached the model: its sha256 is on the chat spans
    prompted = edit(MINIMAL, prompts__system="Be careful.")
    assert measure(store, prompted, child, ["v1"], ["p1"], "validation").live is True  # child's prompt = MINIMAL's
    assert measure(store, MINIMAL, prompted, ["v1"], ["p1"], "validation").changes[-1].live is False
    [sha] = store.rows("SELECT DISTINCT attributes->>'$.\"metaopt.system.sha256\"' AS s FROM spans WHERE trial_id = 'v1'"
                       " AND operation_name = 'chat'")
    assert sha["s"] == prompt_sha256(MINIMAL.system_prompt("main"))
    # limits: a raised timeout mattered only where a call ran past the old one (12 s > 10 s)
    slower = edit(MINIMAL, tools__bash__timeout_s=30)
    assert measure(store, MINIMAL, slower, ["v1"], [], "validation").live is True
    assert measure(store, MINIMAL, edit(MINIMAL, tools__bash__output_limit=4000), ["v1"], [], "validation").live is False
    # removing a tool the parent never called changed nothing; name and description are not parts that run
    no_finish = MINIMAL.model_copy(update={"tools": MINIMAL.tools[:1]})
    assert measure(store, MINIMAL, no_finish, ["v1"], ["p1"], "validation").live is False
    renamed = MINIMAL.model_copy(update={"description": "other words"})
    assert "nothing that runs changed" in measure(store, MINIMAL, renamed, ["v1"], ["p1"], "validation").reason
    # trials that left no spans (tracing off): cannot tell, never "not live"
    untraced = measure(store, MINIMAL, child, ["no-such-trial"], ["p1"], "validation")
    assert untraced.live is None and "no spans recorded" in untraced.reason


def test_history_records_flips_and_hides_held_out_tasks(store):
    ledger = Ledger(store, EXP)
    ledger.create("b", {}, {"train": ["t1", "t2", "t3"], "validation": ["v1"], "test": ["x1"]})
    child = edit(MINIMAL, routing__limits__max_turns=16)
    ledger.add_candidate(f"{EXP}/c0", MINIMAL, iteration=0, status="baseline")
    ledger.add_candidate(f"{EXP}/c1", child, iteration=1, status="pending", parent=MINIMAL, parent_id=f"{EXP}/c0",
                         proposer="llm", rationale="more turns")
    ledger.set_status(f"{EXP}/c1", "rejected", "screen: fail")
    ledger.decision(f"{EXP}/c1", f"{EXP}/c0", "validation", "reject", "reject: gain +0.010", "rule", delta=0.01, se=0.02)
    rows = [("c0", "train", "t1", 0.0), ("c0", "train", "t2", 1.0), ("c0", "train", "t3", 0.0),
            ("c1", "train", "t1", 1.0), ("c1", "train", "t2", 0.0), ("c0", "validation", "v1", 1.0),
            ("c1", "validation", "v1", 0.0), ("c0", "test", "x1", 1.0)]
    for i, (cid, split, task, score) in enumerate(rows):
        store.insert(trial(f"r{i}", task, f"{EXP}/{cid}", split, score))
    [c0, c1] = hist.load(store, EXP)
    assert c1.status == "rejected" and c1.diff and "max_turns" in c1.diff
    assert c1.flips("fixed") == ["t1"] and c1.flips("broke") == ["t2"]
    assert [t.task_id for t in c1.train] == ["t1", "t2"] and [g.stage for g in c1.gate] == ["validation"]
    from metaopt.meta_agent.proposers.history_view import candidate_text, compare_text, history_text
    text = history_text([c0, c1]) + candidate_text(c1, [])
    assert "v1" not in text and "x1" not in text  # validation and test tasks never appear by name
    assert "validation: reject (delta +0.010, SE 0.020" in text and "fixed ['t1']; broke ['t2']" in text
    with pytest.raises(KeyError, match="only train tasks"):
        compare_text(store, EXP, [c0, c1], "v1", "c0", "c1")
    note = hist.add_note(store, EXP, "raised max_turns; broke t2", parent_id=f"{EXP}/c0")
    assert note.seq == 1 and hist.add_note(store, EXP, "next: prompt").seq == 2
    assert [n.text for n in hist.notes(store, EXP)] == ["raised max_turns; broke t2", "next: prompt"]


def rejected_child(store: Store, ledger: Ledger, rev) -> None:
    """`rev` as c1, a child of c0 rejected at validation, its claim in the store as the optimizer records it."""
    ledger.add_candidate(f"{EXP}/c1", rev.harness, iteration=1, status="pending", parent=MINIMAL,
                         parent_id=f"{EXP}/c0", proposer="heuristic", rationale=rev.rationale)
    store.con.execute("UPDATE candidates SET predictions = ? WHERE candidate_id = ?",
                      [rev.manifest.model_dump_json(), f"{EXP}/c1"])
    ledger.set_status(f"{EXP}/c1", "rejected", "validation: reject")


def test_heuristic_moves_on_to_the_next_cause_after_a_rejection(store):
    tracing = Tracing.for_store(store)
    slow = ("bash", "timed out", {"exit_code": None, "timed_out": True, "duration_s": 10.0})
    for i in range(3):  # three turn-limit failures, two with a timed-out call
        episode(store, tracing, MINIMAL, f"f{i}", f"t{i}", f"{EXP}/c0", "train", [slow] * (i > 0) + [("bash", "", {})],
                "turn_limit", 0.0)
    tracing.shutdown()
    ledger = Ledger(store, EXP)
    ledger.create("b", {}, {"train": ["t0", "t1", "t2"], "validation": [], "test": []})
    ledger.add_candidate(f"{EXP}/c0", MINIMAL, iteration=0, status="baseline")
    ev = Evidence(store, ["f0", "f1", "f2"], EXP, parent_id=f"{EXP}/c0")
    first = HeuristicProposer().propose(MINIMAL, ev, set())
    assert first.harness.routing.limits.max_turns == 16 and first.harness.tools[0].timeout_s == 30
    assert first.manifest.fixes == ["t0", "t1", "t2"] and "[turn_limit]" in first.manifest.cause
    # the first revision is rejected: its claim is in the store, as the optimizer records it
    rejected_child(store, ledger, first)
    # same parent, same evidence: before the history it proposed the same again (stopped by `tried`)
    tried = {MINIMAL.content_hash(), first.harness.content_hash()}
    p = HeuristicProposer()
    assert p.propose(MINIMAL, ev, tried) is None  # both causes were tried together and rejected
    assert sorted(s.split(" ")[0] for s in p.last_run["skipped"]) == ["timeout:bash", "turn_limit"]
    # only the turn-limit change was rejected: it moves on to the timeout alone
    store.con.execute("UPDATE candidates SET predictions = ? WHERE candidate_id = ?",
                      [Manifest(cause="episodes hit the turn limit [turn_limit]").model_dump_json(), f"{EXP}/c1"])
    nxt = HeuristicProposer().propose(MINIMAL, ev, tried)
    assert nxt.harness.routing.limits.max_turns == 8 and nxt.harness.tools[0].timeout_s == 30
    assert "skipped, tried before: turn_limit (tried in c1" in nxt.rationale
    assert yaml.safe_load(nxt.manifest.model_dump_json())["fixes"] == ["t1", "t2"]


def test_heuristic_raises_a_limit_again_when_the_raise_fell_short(store):
    """A rejected candidate that raised the turn limit 8 -> 16 and whose own train trials still
    end at 16 turns: the next proposal from the same parent raises it again, from 16 to 32 (the
    briefing offers the same edit, failures.suggested_calls)."""
    tracing = Tracing.for_store(store)
    for i in range(2):
        episode(store, tracing, MINIMAL, f"f{i}", f"t{i}", f"{EXP}/c0", "train", [("bash", "", {})], "turn_limit", 0.0)
    ledger = Ledger(store, EXP)
    ledger.create("b", {}, {"train": ["t0", "t1"], "validation": [], "test": []})
    ledger.add_candidate(f"{EXP}/c0", MINIMAL, iteration=0, status="baseline")
    ev = Evidence(store, ["f0", "f1"], EXP, parent_id=f"{EXP}/c0")
    first = HeuristicProposer().propose(MINIMAL, ev, set())
    assert first.harness.routing.limits.max_turns == 16
    rejected_child(store, ledger, first)
    tried = {MINIMAL.content_hash(), first.harness.content_hash()}
    assert HeuristicProposer().propose(MINIMAL, ev, tried) is None  # c1 has no train trials yet: nothing says it fell short
    episode(store, tracing, first.harness, "g0", "t0", f"{EXP}/c1", "train", [("bash", "", {})], "turn_limit", 0.0)
    episode(store, tracing, first.harness, "g1", "t1", f"{EXP}/c1", "train", [("bash", "", {})], "finished", 1.0)
    tracing.shutdown()
    again = HeuristicProposer().propose(MINIMAL, ev, tried)
    assert again is not None and again.harness.routing.limits.max_turns == 32, again
    assert "raised routing.limits.max_turns 8 -> 32 (c1 raised it less and its train trials still hit it)" in again.rationale and again.manifest.fixes == ["t0", "t1"]
