"""Experiment-wise error control: alpha bookkeeping, the exact test, the bias-aware estimate.
Arithmetic checked by hand; error guarantees checked by seeded simulation at modest sizes."""

from __future__ import annotations

import math
import random
from statistics import NormalDist

import pytest

from metaopt.meta_agent.error_control import (
    AlphaSpending,
    conditional_estimate,
    seed_for,
    stratified_p_value,
    z_critical,
)


def test_alpha_levels_are_geometric_and_never_sum_past_alpha():
    a = AlphaSpending(alpha=0.05, spend=0.8)
    assert [a.level(j) for j in (1, 2, 3)] == pytest.approx([0.04, 0.008, 0.0016])
    assert sum(a.level(j) for j in range(1, 500)) <= 0.05
    assert sum(a.level(j) for j in range(1, 500)) == pytest.approx(0.05)
    assert AlphaSpending(alpha=0.1, spend=1.0).level(1) == pytest.approx(0.1)
    assert AlphaSpending(alpha=0.1, spend=1.0).level(2) == 0.0  # all of it on the first


def test_alpha_spending_state_begin_index_and_spent():
    a = AlphaSpending(alpha=0.05, spend=0.5)
    assert (a.index("c1"), a.spent) == (1, 0.0)
    b = a.begin("c1").begin("c4")
    assert b.begin("c1") == b and b.begin("c4") == b  # beginning again changes nothing
    assert (b.index("c1"), b.index("c4"), b.index("c9")) == (1, 2, 3)
    assert b.spent == pytest.approx(0.025 + 0.0125)
    assert a.confirmed == ()  # frozen: begin returned a new state


def test_alpha_state_is_rebuilt_from_gate_rows_in_order():
    rows = [{"candidate_id": "c1", "stage": "select"}, {"candidate_id": "c2", "stage": "select"},
            {"candidate_id": "c2", "stage": "confirm"}, {"candidate_id": "c2", "stage": "confirm"},
            {"candidate_id": "c3", "stage": "screen"}, {"candidate_id": "c5", "stage": "confirm"}]
    a = AlphaSpending.from_rows(rows, alpha=0.05, spend=0.8)
    assert a.confirmed == ("c2", "c5")
    assert a == AlphaSpending(alpha=0.05, spend=0.8).begin("c2").begin("c5")


def test_exact_test_by_hand():
    # One task: child 2/2, parent 0/2. Given 2 successes among 4 trials, P(child holds both) = 1/6.
    p, method = stratified_p_value({"a": [1.0, 1.0]}, {"a": [0.0, 0.0]})
    assert p == pytest.approx(1 / 6) and method.startswith("exact")
    # Two such tasks: both must go the child's way, 1/36. A tie task adds nothing.
    p, _ = stratified_p_value({"a": [1.0, 1.0], "b": [1.0, 1.0], "c": [0.0, 0.0]},
                              {"a": [0.0, 0.0], "b": [0.0, 0.0], "c": [0.0, 0.0]})
    assert p == pytest.approx(1 / 36)
    # The child worse: p = 1. Errored trials drop; tasks one side never scored drop.
    assert stratified_p_value({"a": [0.0, 0.0]}, {"a": [1.0, 1.0]})[0] == pytest.approx(1.0)
    p, _ = stratified_p_value({"a": [1.0, None, 1.0], "z": [1.0]}, {"a": [0.0, 0.0, None], "y": [0.0]})
    assert p == pytest.approx(1 / 6)
    assert stratified_p_value({}, {"a": [1.0]}) == (1.0, "no data")


def test_exact_test_with_uneven_trial_counts():
    # Child 1/1 vs parent 0/3 on one task: 1 success among 4, the child's one trial holds it: 1/4.
    assert stratified_p_value({"a": [1.0]}, {"a": [0.0, 0.0, 0.0]})[0] == pytest.approx(0.25)
    # Statistic is the sum of per-task child means: with weights 1/1 and 1/2 the support is
    # {0, .5, 1, 1.5, 2}; child a 1/1 (of 1 success in 3), b 1/2 (of 1 success in 4):
    # P(a=1) = 1/3, P(b=1/2) = 1/2 -> P(T >= 1.5) = P(a=1, b>=.5) = 1/3 * 1/2.
    p, _ = stratified_p_value({"a": [1.0], "b": [1.0, 0.0]}, {"a": [0.0, 0.0], "b": [0.0, 0.0]})
    assert p == pytest.approx(1 / 6)


def test_permutation_test_matches_the_exact_one_and_is_seeded():
    child = {f"t{i}": [1.0, 1.0, 0.0] for i in range(4)}
    parent = {f"t{i}": [0.0, 1.0, 0.0, 0.0] for i in range(4)}
    exact, _ = stratified_p_value(child, parent)
    # Nudge one score off {0, 1} so the permutation path runs on (nearly) the same data.
    child["t0"][2] = 1e-12
    mc, method = stratified_p_value(child, parent, seed=7, draws=4000)
    assert method == "stratified permutation test (4000 draws, seed 7)"
    assert mc == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 4000))
    assert stratified_p_value(child, parent, seed=7, draws=4000)[0] == mc
    assert seed_for("c1", "confirm", 2) == seed_for("c1", "confirm", 2) != seed_for("c1", "confirm", 3)


@pytest.mark.parametrize("scores", ["binary", "graded"])
def test_the_test_is_valid_under_the_null(scores):
    """Child and parent draw from the same per-task distributions (flaky and solid tasks, uneven
    trial counts, errors): P(p <= level) <= level at every level, up to 3 Monte Carlo SE."""
    rng = random.Random(11)
    runs, levels = 1500 if scores == "binary" else 300, (0.01, 0.05, 0.2)
    hits = dict.fromkeys(levels, 0)
    for _ in range(runs):
        child, parent = {}, {}
        for i in range(8):
            p = (0.5, 0.5, 0.8, 0.0, 1.0, 0.3, 0.5, 0.9)[i]
            if scores == "binary":
                draw = lambda p=p: None if rng.random() < 0.05 else float(rng.random() < p)
            else:
                draw = lambda p=p: round(min(1.0, max(0.0, rng.gauss(p, 0.2))), 2)
            child[f"t{i}"], parent[f"t{i}"] = [draw() for _ in range(3)], [draw() for _ in range(6)]
        pv, _ = stratified_p_value(child, parent, seed=rng.getrandbits(32), draws=400)
        for lv in levels:
            hits[lv] += pv <= lv
    for lv in levels:
        assert hits[lv] / runs <= lv + 3 * math.sqrt(lv * (1 - lv) / runs), (lv, hits[lv] / runs)


def test_the_test_has_power_against_a_real_gain():
    rng = random.Random(12)
    rejected = 0
    for _ in range(200):
        child = {f"t{i}": [float(rng.random() < (1.0 if i < 4 else 0.5)) for _ in range(6)] for i in range(10)}
        parent = {f"t{i}": [float(rng.random() < 0.5) for _ in range(12)] for i in range(10)}
        rejected += stratified_p_value(child, parent)[0] <= 0.05
    assert rejected / 200 > 0.7  # z about 2.9 at one-sided 0.05: about 0.8


def test_conditional_estimate_shrinks_near_the_threshold_and_not_far_above():
    far = conditional_estimate(0.40, 0.05, 1.96, selection_gain=0.5)
    assert far.adjusted_gain == pytest.approx(0.40, abs=1e-3) and far.low < 0.40 < far.high
    assert far.high - far.low == pytest.approx(2 * 1.96 * 0.05, abs=2e-3)  # the plain interval
    near = conditional_estimate(0.11, 0.05, 1.96)
    assert near.adjusted_gain < near.confirmation_gain == 0.11 and near.low < near.adjusted_gain < near.high <= 0.11 + 0.1
    assert near.selection_gain is None and "optimistic" in near.note
    # Monotone: a larger observed gain never gets a smaller estimate.
    ests = [conditional_estimate(d, 0.05, 1.96).adjusted_gain for d in (0.10, 0.12, 0.15, 0.2, 0.3)]
    assert ests == sorted(ests)
    zero = conditional_estimate(0.2, 0.0, 1.96)
    assert (zero.adjusted_gain, zero.low, zero.high) == (0.2, 0.2, 0.2) and "no adjustment" in zero.note


def test_conditional_estimate_is_median_unbiased_and_covers_among_the_selected():
    """Draw gains, keep those that pass (z >= 1.96), estimate: half the estimates lie below the
    truth and the 95% intervals cover it about 95% of the time, where the raw figure is biased."""
    rng, nd = random.Random(13), NormalDist()
    for mu in (0.5, 2.0):  # true gain in SE units: barely detectable, and clearly
        below = covered = raw_above = kept = 0
        while kept < 600:
            z = nd.inv_cdf(rng.random()) + mu
            if z < 1.96:
                continue
            kept += 1
            e = conditional_estimate(z * 0.05, 0.05, 1.96)
            below += e.adjusted_gain <= mu * 0.05
            covered += e.low <= mu * 0.05 <= e.high
            raw_above += z > mu
        assert abs(below / kept - 0.5) < 0.07, (mu, below / kept)
        assert abs(covered / kept - 0.95) < 0.03, (mu, covered / kept)
        assert raw_above / kept > 0.6  # the unadjusted figure leans high among the selected


def test_z_critical():
    assert z_critical(0.025) == pytest.approx(1.96, abs=1e-3)
    tiny = AlphaSpending().level(30)  # a long run's late confirmation: 1 - level rounds to 1.0
    assert tiny < 1e-16 and z_critical(tiny) > z_critical(AlphaSpending().level(22)) > 0
    assert z_critical(0.5) == pytest.approx(0.0)
