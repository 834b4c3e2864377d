"""The project's acceptance criterion for the gate, checked by seeded simulation:

"With synthetic per-task score distributions: a true gain of 10 points under run-to-run noise of
5 points is accepted at least 90% of the time; no true gain is accepted at most 5% of the time."

Each simulated experiment: N validation tasks with true means drawn from a spread of difficulties;
the baseline (the parent harness) runs K times to measure the noise floor; then parent and child
are evaluated independently, K trials each, and `decide` rules with the default GateRule.

Rates observed with these seeds (500 experiments per condition, printed with `pytest -s`):
  gaussian, N=20, K=3, SD 0.05:  gain +0.10 -> 1.000; gain 0 -> 0.000; gain +0.05 (= min effect) ~0.5;
                                 gain 0 with min_effect = 0 (the z-test alone) ~0.04 (nominal 0.05).
  binary, N=20, K=3, 30% flaky:  gain 0 -> ~0.03; gain +0.10 -> ~0.25. Too few tasks for 10 points:
                                 the sizing table (optimizer-lessons.md §3) puts the 80%-power minimum
                                 detectable effect at 11.4 pp for N=30, K=3; N=50, K=3 gets ~0.65.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from metaopt.meta_agent.gate import GateRule, NoiseFloor, Scores, decide

EXPERIMENTS = 500
N_TASKS = 20
K = 3
NOISE_SD = 0.05

# A world maps the rng and the true gain to (parent true means, child true means, sampler).
Sampler = Callable[[random.Random, dict[str, float], int], Scores]


def gaussian_trials(rng: random.Random, means: dict[str, float], k: int) -> Scores:
    """Trial score = true mean + N(0, 0.05), clipped to [0, 1] because Scores live in [0, 1] (a
    verifier can never report 1.07). True means stay in [0.10, 0.90] with the gain, at least 2 SD
    from the edges, so clipping barely biases the task means (it only shrinks noise a little)."""
    return {t: [min(1.0, max(0.0, rng.gauss(m, NOISE_SD))) for _ in range(k)] for t, m in means.items()}


def bernoulli_trials(rng: random.Random, means: dict[str, float], k: int) -> Scores:
    return {t: [float(rng.random() < p) for _ in range(k)] for t, p in means.items()}


def gaussian_world(rng: random.Random, gain: float, n: int):
    means = {f"t{i}": rng.uniform(0.10, 0.80) for i in range(n)}
    return means, {t: m + gain for t, m in means.items()}, gaussian_trials


def binary_world(rng: random.Random, gain: float, n: int):
    """30% of tasks flaky at p = 0.5, the rest deterministic (half solved, half not). A true gain g
    turns round(g * n) deterministically failed tasks into solved ones (+0.10 at N=20: 2 tasks)."""
    n_flaky = round(0.3 * n)
    ps = [0.5] * n_flaky + [0.0] * ((n - n_flaky) // 2)
    ps += [1.0] * (n - len(ps))
    rng.shuffle(ps)
    means = {f"t{i}": p for i, p in enumerate(ps)}
    child = dict(means)
    for t in [t for t, p in means.items() if p == 0.0][: round(gain * n)]:
        child[t] = 1.0
    return means, child, bernoulli_trials


def acceptance_rate(rng: random.Random, world, gain: float, n: int = N_TASKS, k: int = K,
                    experiments: int = EXPERIMENTS, rule: GateRule = GateRule()) -> float:
    accepted = 0
    for _ in range(experiments):
        parent_means, child_means, trials = world(rng, gain, n)
        noise = NoiseFloor.measure(trials(rng, parent_means, k))
        parent, child = trials(rng, parent_means, k), trials(rng, child_means, k)
        accepted += decide(parent, child, noise, rule).outcome == "accept"
    return accepted / experiments


def report(label: str, rate: float) -> float:
    print(f"gate simulation: {label}: accepted {rate:.3f} of {EXPERIMENTS}")
    return rate


def test_true_gain_of_10_points_under_5_point_noise_is_accepted_at_least_90_percent():
    rate = acceptance_rate(random.Random(101), gaussian_world, 0.10)
    report("gaussian N=20 K=3 sd=0.05 gain=+0.10", rate)
    assert rate >= 0.90


def test_no_true_gain_is_accepted_at_most_5_percent():
    rate = acceptance_rate(random.Random(102), gaussian_world, 0.0)
    report("gaussian N=20 K=3 sd=0.05 gain=0", rate)
    assert rate <= 0.05


def test_z_test_alone_is_calibrated():
    """With min_effect = 0 only delta > z * SE guards: the false-accept rate should sit near the
    nominal one-sided 5% (a bit under: SE is the max of two estimates). A wrong SE (off by sqrt(n)
    or sqrt(K)) lands far outside this band."""
    rate = acceptance_rate(random.Random(103), gaussian_world, 0.0, rule=GateRule(min_effect=0.0))
    report("gaussian gain=0, min_effect=0 (z-test alone)", rate)
    assert 0.01 <= rate <= 0.08
    # At a gain equal to min effect, the gate is a coin flip on which side of it delta lands.
    report("gaussian gain=+0.05 (= min effect)", acceptance_rate(random.Random(104), gaussian_world, 0.05))


def test_binary_tasks_false_accepts_stay_under_5_percent():
    rate = report("binary N=20 K=3 30% flaky gain=0", acceptance_rate(random.Random(105), binary_world, 0.0))
    assert rate <= 0.05
    # Power is the budget's business (more tasks or trials), not the gate's: documented, not asserted.
    report("binary N=20 K=3 30% flaky gain=+0.10", acceptance_rate(random.Random(106), binary_world, 0.10))
    report("binary N=50 K=3 30% flaky gain=+0.10",
           acceptance_rate(random.Random(107), binary_world, 0.10, n=50))


def test_the_gate_simulation_script_replays_its_decisions_through_the_real_gate():
    """perf.gate_simulation re-implements both gates array-wise; its crosscheck replays the first
    experiments of every scenario through gate.screen / gate.decide / sequential.validate. A drift
    between the two (a plan, an order, a rounding on a bound) shows up as a disagreement here."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    out = subprocess.run([sys.executable, "-m", "perf.gate_simulation", "--experiments", "40"], capture_output=True, check=False,
                         text=True, timeout=300, cwd=Path(__file__).parents[1])
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    for gate, (total, agree) in report["crosscheck"].items():
        assert total > 0 and agree == total, (gate, total, agree)
    assert len(report["conditions"]) == 8 and set(report["targets"]) == {
        "experiment_wise_false_accept_30_le_0.05_everywhere", "power_+10_n20_k3_no_worse_than_fixed",
        "trials_per_decision_at_least_30pct_below_k_x_n"}
    assert "round 1 in 2 growing shares" in report["staged_gate"]["rule"]
