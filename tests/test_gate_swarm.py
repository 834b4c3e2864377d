"""The staged gate with N candidates in flight (perf.gate_swarm), a small run of the simulation
through the real gate functions: the experiment-wise false-acceptance bound holds under the
concurrency rule (alpha_j by begin order, a head-to-head for a child whose parent was superseded)
and fails under plausible wrong rules, so the check is not vacuous. The full figures, per N = 1, 2,
4, 8, are `python -m perf.gate_swarm` (perf/RESULTS.md)."""

from __future__ import annotations

from metaopt.meta_agent.sequential import SequentialRule
from perf.gate_swarm import World, run

ALPHA = SequentialRule().alpha
# Every candidate the screen passes reaches a confirmation: the selection filters nothing, so the
# bound rests on the confirmations' alpha alone and a wrong assignment of it shows.
OPEN_SELECTION = SequentialRule(min_effect=0.0, select_z=-10.0, futility_z=-10.0)


def _null(rule: str, n: int, experiments: int = 150) -> dict:
    out = run([n], [rule], experiments, seed=1, world=World(), srule=OPEN_SELECTION, worlds=("null",))
    return out["results"][rule][str(n)]["null"]


def test_the_null_bound_holds_with_8_in_flight_and_fails_when_each_worker_spends_its_own_alpha():
    right, wrong = _null("begin", 8), _null("per_worker", 8)
    print("gate swarm, null world, open selection, N = 8:", {"begin": right, "per_worker": wrong})
    assert right["confirmations_begun"][0] > 5  # the bound is exercised: many confirmations per experiment
    assert right["alpha_committed_max"] <= ALPHA + 1e-12
    assert right["any_acceptance"][0] <= ALPHA
    assert wrong["alpha_committed_max"] > 2 * ALPHA
    rate, se = wrong["any_acceptance"]
    assert rate - 2 * se > ALPHA, wrong["any_acceptance"]


def test_a_child_whose_parent_was_superseded_moves_the_head_only_past_a_head_to_head():
    """Power world (some proposals truly better), 4 in flight, the default gate: with the rule the
    head never moved to a candidate no better than the head before it; accepting a child on its
    win over a superseded parent (no_h2h) does that in most experiments."""
    out = run([4], ["begin", "no_h2h"], 30, seed=2, world=World(), worlds=("power",))["results"]
    right, wrong = out["begin"]["4"]["power"], out["no_h2h"]["4"]["power"]
    print("gate swarm, power world, N = 4:", {"begin": right, "no_h2h": wrong})
    assert right["head_to_head"][0] > 0.5 and right["superseded_rejected"][0] > 0
    assert right["head_moved_to_no_better"][0] <= 0.1 and right["moves_to_better"][0] >= 1
    assert wrong["head_moved_to_no_better"][0] >= 0.5


def test_one_in_flight_is_the_sequential_loop_under_every_rule():
    out = run([1], ["begin", "finish", "per_worker", "no_h2h"], 10, seed=3, world=World(), worlds=("power",))["results"]
    first = out["begin"]["1"]
    assert first["power"]["head_to_head"] == [0.0, 0.0]
    assert all(by_n["1"] == first for by_n in out.values())
