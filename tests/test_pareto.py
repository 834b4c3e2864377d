"""The `pareto` strategy: per-task frontier, win-proportional seeded selection, GEPA merge."""

import random
from collections import Counter

import pytest

from metaopt.meta_agent.records import CandidateView
from metaopt.meta_agent.search.strategies import get_strategy
from metaopt.meta_agent.search.strategies.pareto import Pareto, frontier, merge
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.harness_io import load_harness, resolve_harness

BASE = load_harness(resolve_harness("minimal"))


def edit(h: Harness, fn) -> Harness:
    data = h.model_dump(mode="json")
    fn(data)
    return Harness.model_validate(data)


def tool(data: dict, name: str) -> dict:
    return next(t for t in data["tools"] if t["name"] == name)


def cand(n: int, status: str = "accepted", scores: dict | None = None, parent: str | None = "c0",
         harness: Harness = BASE) -> CandidateView:
    return CandidateView(candidate_id=f"c{n}", parent_id=None if n == 0 else parent, iteration=n,
                         status=status, harness=harness, val_mean=0.0, val_scores=scores or {})


def test_registered():
    assert isinstance(get_strategy("pareto"), Pareto)
    assert get_strategy("pareto").name == "pareto"


def test_frontier_wins_ties_and_the_everywhere_good_caveat():
    cands = [cand(0, "baseline", {"t1": [1, 1], "t2": [0, 0], "t3": [0, 0], "t4": [0, 0]}),
             cand(1, scores={"t1": [0, 0], "t2": [1, 1], "t3": [0.5, 0.5], "t4": [0, 0]}),
             # good everywhere, best nowhere: not on the frontier (GEPA's known caveat)
             cand(2, scores={"t1": [0.9, 0.9], "t2": [0.9, 0.9], "t3": [0.9, None], "t4": [0, 0]}),
             cand(3, scores={"t1": [1, 1], "t2": [0, 0], "t3": [1, None], "t4": [0, 0]})]
    f = frontier(cands)
    assert "c2" not in f
    # t1 tied by c0 and c3; t3: None trials are excluded (c3's mean is 1.0); t4: nobody solved it
    assert f == {"c0": ["t1"], "c1": ["t2"], "c3": ["t1", "t3"]}
    assert Pareto.frontier(cands) == f


def test_only_kept_candidates_join():
    cands = [cand(0, "baseline", {"t1": [0.5]}),
             *(cand(i, s, {"t1": [1.0]}) for i, s in
               enumerate(["inconclusive", "rejected", "invalid", "pending"], start=1))]
    assert frontier(cands) == {"c0": ["t1"]}
    assert Pareto().select(cands, random.Random(0)).candidate_id == "c0"


def test_selection_is_proportional_to_wins():
    cands = [cand(0, "baseline", {"t1": [1], "t2": [0], "t3": [0], "t4": [0]}),
             cand(1, scores={"t1": [0], "t2": [1], "t3": [1], "t4": [1]})]
    rng, n = random.Random(123), 8000
    counts = Counter(Pareto().select(cands, rng).candidate_id for _ in range(n))
    assert counts["c0"] / n == pytest.approx(0.25, abs=0.02)
    assert counts["c1"] / n == pytest.approx(0.75, abs=0.02)


def test_selection_is_deterministic_per_seed():
    cands = [cand(i, "baseline" if i == 0 else "accepted", {f"t{j}": [float(i == j)] for j in range(5)})
             for i in range(5)]

    def draws(seed):
        rng = random.Random(seed)
        return [Pareto().select(cands, rng).candidate_id for _ in range(50)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)
    assert draws(7) == [Pareto().select(list(reversed(cands)), r).candidate_id
                        for r in [random.Random(7)] for _ in range(50)]  # input order does not matter


def test_fallback_without_per_task_data():
    cands = [cand(0, "baseline"), cand(1), cand(2, "rejected"), cand(3, "inconclusive")]
    assert Pareto().select(cands, random.Random(0)).candidate_id == "c1"
    assert Pareto().select([cand(0, "baseline")], random.Random(0)).candidate_id == "c0"
    assert frontier(cands) == {}
    with pytest.raises(ValueError):
        Pareto().select([cand(1, "rejected")], random.Random(0))


# -- merge -----------------------------------------------------------------------------------

def more_turns(d):
    d["routing"]["limits"]["max_turns"] = 30


def longer_bash(d):
    tool(d, "bash")["timeout_s"] = 120


def pair(fa, fb, base=BASE):
    """Baseline plus two children that split the validation tasks between them."""
    return [cand(0, "baseline", {"t1": [0.2], "t2": [0.2]}, harness=base),
            cand(1, scores={"t1": [1.0], "t2": [0.0]}, harness=edit(base, fa)),
            cand(2, scores={"t1": [0.0], "t2": [1.0]}, harness=edit(base, fb))]


def test_merge_takes_disjoint_changes_from_two_children_of_the_baseline():
    out = merge(pair(more_turns, longer_bash), random.Random(0))
    assert out is not None
    child, parents, why = out
    assert parents == ["c1", "c2"]
    assert child.routing.limits.max_turns == 30
    assert next(t for t in child.tools if t.name == "bash").timeout_s == 120
    assert [t.name for t in child.tools] == [t.name for t in BASE.tools]
    assert child.prompts == BASE.prompts and child.name == BASE.name
    assert "from c1: routing.limits" in why and "from c2: tools.bash" in why and "c0" in why
    assert Pareto().merge(pair(more_turns, longer_bash), random.Random(0))[0] == child


def test_merge_with_added_tool_and_role_prompt_and_deeper_lineage():
    def add_tool(d):
        d["tools"].append({"name": "grep", "kind": "shell", "description": "grep",
                           "parameters": {"type": "object", "properties": {"p": {"type": "string"}}},
                           "template": "grep -r {p} ."})

    def role_prompt(d):
        d["prompts"]["roles"]["main"] = "Be careful."
        d["routing"]["roles"]["main"]["prompt"] = "main"

    cands = pair(add_tool, more_turns)
    # c3, a grandchild of c0 through c2, adds a role prompt; c1 and c3 meet at c0
    c3 = cand(3, scores={"t1": [0.0], "t2": [1.0], "t3": [1.0]}, parent="c2",
              harness=edit(cands[2].harness, role_prompt))
    cands[0].val_scores["t3"] = [0.0]
    cands[2].val_scores["t3"] = [0.5]
    cands.append(c3)
    assert set(frontier(cands)) == {"c1", "c2", "c3"}
    found = {tuple(p): (h, why) for p, (h, _, why) in
             ((m[1], m) for m in (merge(cands, random.Random(s)) for s in range(30)) if m)}
    # c2 vs c3: c2 is c3's ancestor and changed nothing vs itself -> not a pair
    assert set(found) == {("c1", "c2"), ("c1", "c3")}
    h, why = found[("c1", "c3")]
    assert [t.name for t in h.tools] == ["bash", "finish", "grep"]
    assert h.routing.limits.max_turns == 30 and h.prompts.roles == {"main": "Be careful."}
    assert "prompts.roles.main" in why and "routing.roles" in why


def test_no_merge_when_both_changed_the_same_component():
    def fewer_turns(d):
        d["routing"]["limits"]["max_turns"] = 4

    def wall(d):
        d["routing"]["limits"]["max_wall_s"] = 100.0

    assert merge(pair(more_turns, fewer_turns), random.Random(0)) is None
    assert merge(pair(more_turns, wall), random.Random(0)) is None  # same component, routing.limits

    def tool_desc(d):
        tool(d, "bash")["description"] = "Run bash."

    assert merge(pair(longer_bash, tool_desc), random.Random(0)) is None  # whole ToolDef is one unit


def test_model_section_is_never_merged():
    def hot(d):
        more_turns(d)
        d["model"]["temperature"] = 0.9

    def effort(d):
        longer_bash(d)
        d["model"]["reasoning_effort"] = "high"

    child, _, why = merge(pair(hot, effort), random.Random(0))
    assert child.model == BASE.model
    assert child.routing.limits.max_turns == 30 and "model" not in why

    def model_only(d):
        d["model"]["temperature"] = 0.1

    assert merge(pair(more_turns, model_only), random.Random(0)) is None  # a model change is no change


def test_no_merge_without_a_pair_on_the_frontier_or_when_already_tried():
    cands = pair(more_turns, longer_bash)
    cands[2] = cands[2].model_copy(update={"val_scores": {"t1": [0.0], "t2": [0.0]}})  # c2 wins nothing
    assert merge(cands, random.Random(0)) is None
    cands = pair(more_turns, longer_bash)
    cands[2] = cands[2].model_copy(update={"status": "inconclusive"})
    assert merge(cands, random.Random(0)) is None
    cands = pair(more_turns, longer_bash)
    child, _, _ = merge(cands, random.Random(0))
    assert merge(cands, random.Random(0), tried={child.content_hash()}) is None
    assert merge([cand(0, "baseline")], random.Random(0)) is None
