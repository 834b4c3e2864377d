"""The acceptance gate on hand-made scores, with the arithmetic checked by hand."""

import math

import pytest
from pydantic import ValidationError

from metaopt.meta_agent.gate import (
    ASSUMED_TASK_VARIANCE,
    Decision,
    GateRule,
    NoiseFloor,
    confidence_interval,
    decide,
    rule_text,
    screen,
    t_quantile,
)

TASKS = [f"t{i}" for i in range(10)]


def const(trials: list[float | None], tasks=TASKS) -> dict[str, list[float | None]]:
    return {t: list(trials) for t in tasks}


# Baseline with variance 0.01 on every task: trials 0.4, 0.5, 0.6.
FLOOR = NoiseFloor.measure(const([0.4, 0.5, 0.6]))


def test_noise_floor_arithmetic_by_hand():
    baseline = {"a": [1.0, 0.0, 1.0], "b": [1.0, 1.0, 1.0], "c": [0.5, 0.7, None], "d": [0.2]}
    floor = NoiseFloor.measure(baseline)
    # a: mean 2/3, var ((1/3)^2 * 2 + (2/3)^2) / 2 = 1/3; b: 0; c: mean 0.6, var (0.01 + 0.01) / 1 = 0.02.
    # d has one scored trial and contributes nothing. Pooled by dof: (2 * 1/3 + 2 * 0 + 1 * 0.02) / 5.
    assert floor.per_task_var == pytest.approx({"a": 1 / 3, "b": 0.0, "c": 0.02})
    assert floor.pooled_var == pytest.approx((2 / 3 + 0.02) / 5)
    assert floor.flaky_share == pytest.approx(2 / 3)
    assert (floor.k, floor.n_tasks, floor.measured) == (3, 3, True)
    assert floor.se_of_delta(10, 3) == pytest.approx(math.sqrt(2 * floor.pooled_var / 30))
    assert floor.se_of_delta(0, 3) == 0.0


def test_k1_baseline_is_flagged_and_assumes_conservative_variance():
    floor = NoiseFloor.measure({"a": [1.0], "b": [0.0], "c": [None]})
    assert not floor.measured
    assert floor.pooled_var == ASSUMED_TASK_VARIANCE == 0.075
    assert floor.k == 1 and floor.n_tasks == 0
    d = decide(const([0.0]), const([1.0]), floor)
    assert "noise floor assumed" in d.reason and "K=1" in d.reason
    assert d.se == pytest.approx(math.sqrt(2 * 0.075 / 10))


def test_clear_gain_is_accepted_with_numbers_in_reason():
    d = decide(const([0.4, 0.5, 0.6]), const([0.6, 0.7, 0.8]), FLOOR)
    # Every d_i = 0.2, so the sample SE is 0 and the measured floor sets SE: sqrt(2 * 0.01 / 30).
    se = math.sqrt(2 * 0.01 / 30)
    assert d.outcome == "accept"
    assert d.delta == pytest.approx(0.2) and d.se == pytest.approx(se)
    assert d.threshold == pytest.approx(0.05)  # 1.645 * 0.0258 = 0.042 < min effect
    assert (d.n_tasks, d.n_validation, d.k_parent, d.k_child, d.coverage) == (10, 10, 3, 3, 1.0)
    assert d.reason == (
        "accept: validation gain +0.200 >= max(min effect 0.050, 1.645 x SE 0.026 = 0.042) "
        "on 10/10 tasks (100% coverage), K=3"
    )


def test_no_gain_is_rejected():
    d = decide(const([0.4, 0.5, 0.6]), const([0.6, 0.4, 0.5]), FLOOR)
    assert d.outcome == "reject" and d.delta == pytest.approx(0.0)
    assert d.reason.startswith("reject: validation gain +0.000 < max(min effect 0.050")


def test_gain_below_min_effect_is_rejected_even_with_no_noise():
    floor = NoiseFloor.measure(const([0.5, 0.5, 0.5]))
    assert floor.pooled_var == 0.0
    d = decide(const([0.5, 0.5, 0.5]), const([0.53, 0.53, 0.53]), floor)
    assert d.se == pytest.approx(0.0, abs=1e-12)
    assert d.delta == pytest.approx(0.03) and d.outcome == "reject"


def test_large_gain_with_huge_noise_is_rejected():
    tasks = ["a", "b", "c", "d", "e"]
    parent = {"a": [0.0], "b": [0.0], "c": [1.0], "d": [1.0], "e": [0.0]}
    child = {"a": [1.0], "b": [1.0], "c": [0.0], "d": [1.0], "e": [0.0]}
    d = decide(parent, child, NoiseFloor.measure(const([0.0], tasks)))
    # d_i = 1, 1, -1, 0, 0: mean 0.2, sample var 2.8 / 4 = 0.7, SE sqrt(0.7 / 5) = 0.374 > floor 0.173.
    assert d.delta == pytest.approx(0.2)
    assert d.se == pytest.approx(math.sqrt(0.7 / 5))
    assert d.outcome == "reject"


def test_sample_se_wins_when_larger_than_floor():
    parent = const([0.5, 0.5, 0.5])
    child = {t: [0.5 + (0.6 if i % 2 else 0.0)] * 3 for i, t in enumerate(TASKS)}  # d_i = 0 or 0.6
    d = decide(parent, child, FLOOR)
    assert d.se == pytest.approx(math.sqrt(0.3 * 0.3 * 10 / 9 / 10))
    assert d.se > FLOOR.se_of_delta(10, 3)


def test_errored_trials_are_dropped_not_zero():
    parent = const([0.5, 0.5, 0.5])
    child = const([0.8, None, 0.8])
    d = decide(parent, child, FLOOR)
    assert d.per_task["t0"] == pytest.approx(0.3)
    assert d.k_child == 3 and d.outcome == "accept"


def test_uneven_trial_counts_use_exact_effective_k():
    parent = const([0.4, 0.6])
    child = const([0.9, 0.9, 0.9, 0.9])
    d = decide(parent, child, FLOOR)
    # Var(d_i) = s2 (1/2 + 1/4) = 2 s2 / k_eff with k_eff = 8/3.
    assert d.se == pytest.approx(FLOOR.se_of_delta(10, 8 / 3))
    assert "K=2/4 (parent/child)" in d.reason


def test_errors_lowering_coverage_make_it_inconclusive_whatever_the_gain():
    parent = const([0.0, 0.0, 0.0])
    child = {t: ([1.0, 1.0, 1.0] if i < 5 else [None, None, None]) for i, t in enumerate(TASKS)}
    d = decide(parent, child, FLOOR)
    assert (d.n_tasks, d.n_validation, d.coverage) == (5, 10, 0.5)
    assert d.outcome == "inconclusive"
    assert d.reason.startswith("inconclusive: only 5/10 validation tasks (50%)")
    # A task only one side ran counts against coverage too.
    d = decide({**parent, "extra": [None]}, {**const([1.0, 1.0, 1.0]), "more": [1.0]}, FLOOR)
    assert (d.n_tasks, d.n_validation, d.outcome) == (10, 12, "accept")


def test_too_few_tasks_is_inconclusive():
    d = decide(const([0.0], ["a", "b"]), const([1.0], ["a", "b"]), FLOOR)
    assert d.coverage == 1.0 and d.n_tasks == 2 and d.outcome == "inconclusive"
    d = decide({}, {}, FLOOR)
    assert (d.outcome, d.n_tasks, d.coverage, d.delta) == ("inconclusive", 0, 0.0, 0.0)


def test_custom_rule_and_extra_keys_forbidden():
    floor = NoiseFloor.measure(const([0.5] * 3))
    d = decide(const([0.5] * 3), const([0.53] * 3), floor, GateRule(min_effect=0.02))
    assert d.outcome == "accept" and "min effect 0.020" in d.reason
    with pytest.raises(ValidationError):
        GateRule(min_efect=0.1)
    with pytest.raises(ValidationError):
        GateRule(min_tasks=1)


def test_decision_round_trips_through_json_and_carries_the_rule():
    d = decide(const([0.4, 0.5, 0.6]), const([0.6, None, 0.8]), FLOOR)
    again = Decision.model_validate_json(d.model_dump_json())
    assert again == d
    assert d.rule_text() == rule_text(GateRule())
    for words in ("min_effect = 0.050", "z = 1.645", "60%", "inconclusive", "never counted as 0"):
        assert words in d.rule_text()


def test_screen_pass_and_fail():
    failing = ["a", "b", "c"]
    parent = {"a": [0.0, 0.0], "b": [0.0, 0.0], "c": [0.0, 0.0], "solved": [1.0, 1.0]}
    s = screen(parent, {"a": [1.0, 1.0], "b": [0.0, 0.0], "c": [0.0, 1.0], "solved": [0.0, 0.0]}, failing)
    assert s.outcome == "pass" and s.n_tasks == 3 and s.worse == 0
    assert s.child_mean == pytest.approx(0.5)
    assert s.reason.startswith("pass: child mean 0.500 > parent mean 0.000")
    # Equal is not better.
    assert screen(parent, parent, failing).outcome == "fail"
    # Higher mean, but worse on 2 of 3 tasks.
    low = {"a": [0.2], "b": [0.2], "c": [0.2]}
    s = screen(low, {"a": [1.0], "b": [0.1], "c": [0.1]}, failing)
    assert s.child_mean > s.parent_mean and s.worse == 2 and s.outcome == "fail"
    assert "worse on 2/3 (> half)" in s.reason
    # Errored trials are excluded; nothing scored on both sides fails.
    s = screen(parent, {"a": [None, 1.0], "b": [None], "c": []}, failing)
    assert (s.outcome, s.n_tasks, s.child_mean) == ("pass", 1, 1.0)
    assert screen(parent, {"a": [None]}, failing).outcome == "fail"


def test_t_quantiles_match_tables():
    for df, q in [(1, 12.706), (2, 4.303), (3, 3.182), (10, 2.228), (30, 2.042), (1000, 1.960)]:
        assert t_quantile(0.95, df) == pytest.approx(q, abs=1e-3)
    assert t_quantile(0.99, 5) == pytest.approx(4.032, abs=1e-3)


def test_confidence_interval_over_task_means():
    m, lo, hi = confidence_interval({"a": [0.4, None], "b": [0.4, 0.6], "c": [0.6, 0.6]})
    # Task means 0.4, 0.5, 0.6: sd 0.1, SE 0.1 / sqrt(3), t(0.975, 2) = 4.303.
    half = 4.3027 * 0.1 / math.sqrt(3)
    assert m == pytest.approx(0.5)
    assert (lo, hi) == (pytest.approx(0.5 - half, abs=1e-4), pytest.approx(0.5 + half, abs=1e-4))
    assert confidence_interval({"a": [0.0], "b": [1.0], "c": [0.0]})[1] == 0.0  # clipped at 0
    assert confidence_interval({"a": [0.7]}) == (0.7, 0.0, 1.0)
    assert math.isnan(confidence_interval({"a": [None]})[0])
    with pytest.raises(ValueError):
        confidence_interval({"a": [0.1], "b": [0.2]}, level=1.0)
