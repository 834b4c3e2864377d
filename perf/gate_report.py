"""The gate simulation's report (perf.gate_simulation): per-condition summaries of the simulated
experiments, the issue's targets checked on them, and the README table."""

from __future__ import annotations

import math

import numpy as np


def _rate(x: np.ndarray) -> list[float]:
    """[mean, Monte Carlo SE] of a 0/1 (or per-experiment) array."""
    x = np.asarray(x, float)
    return [round(float(x.mean()), 4), round(float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0, 4)]


def _mean(xs: list[float]) -> list[float] | None:
    return _rate(np.array(xs)) if xs else None


def summarize(null: dict, powers: dict, later: dict, strong: dict, n: int, k: int, staged: bool) -> dict:
    acc = null["accepted"]
    out = {
        "false_accept_per_proposal": {str(h): _rate(acc[:h].mean(0)) for h in (10, 30)},
        "experiment_wise_false_accept": {str(h): _rate(acc[:h].any(0)) for h in (10, 30)},
        "power_first_proposal": {f"+{round(g * 100)}": _rate(r["accepted"][0]) for g, r in powers.items()},
        "power_after_10_noops_+10": _rate(later["accepted"][10]),
        "false_accept_after_a_real_+20": _rate(strong["accepted"][1:].any(0)),
        "validation_trials_per_decision": {"null": _mean(null["trials"]),
                                           **{f"+{round(g * 100)}": _mean(r["trials"]) for g, r in powers.items()}},
        "trials_vs_fixed_k_x_n": round(float(np.mean(null["trials"])) / (k * n), 3) if null["trials"] else None,
        "decisions_per_null_experiment": round(len(null["trials"]) / acc.shape[1], 2),
    }
    if staged:
        out["confirmations_per_null_experiment"] = _rate(null["confirmations"])
        out["alpha_committed_per_null_experiment"] = _rate(null["spent"])
        out["accepted_gain_estimates"] = {
            f"+{round(g * 100)}": None if not r["estimates"] else {
                "true": g, "selection_gain": _mean([s for s, _ in r["estimates"]]),
                "confirmation_gain": _mean([e.confirmation_gain for _, e in r["estimates"]]),
                "adjusted_gain_median": round(float(np.median([e.adjusted_gain for _, e in r["estimates"]])), 4),
                "interval_covers_true": _rate([e.low <= g <= e.high for _, e in r["estimates"]])}
            for g, r in powers.items()}
    else:
        out["accepted_gain_estimates"] = {f"+{round(g * 100)}": None if not r["reported"] else
                                          {"true": g, "reported_gain": _mean(r["reported"])} for g, r in powers.items()}
    return out


def targets(conditions: list[dict]) -> dict:
    fw = [c["staged"]["experiment_wise_false_accept"]["30"][0] for c in conditions]
    main = [c for c in conditions if c["k"] == 3 and c["n_validation"] == 20]
    return {
        "experiment_wise_false_accept_30_le_0.05_everywhere": {"met": max(fw) <= 0.05, "worst": max(fw)},
        "power_+10_n20_k3_no_worse_than_fixed": {
            f"flaky {c['flaky_share']}": {"fixed": c["fixed"]["power_first_proposal"]["+10"][0],
                                          "staged": c["staged"]["power_first_proposal"]["+10"][0],
                                          "met": c["staged"]["power_first_proposal"]["+10"][0]
                                          >= c["fixed"]["power_first_proposal"]["+10"][0]} for c in main},
        "trials_per_decision_at_least_30pct_below_k_x_n": {
            f"flaky {c['flaky_share']} K={c['k']} n={c['n_validation']}": {
                "ratio": c["staged"]["trials_vs_fixed_k_x_n"], "met": c["staged"]["trials_vs_fixed_k_x_n"] <= 0.7}
            for c in conditions},
    }


def markdown(report: dict) -> str:
    head = ("| flaky | K | n | exp-wise false accept, 30 proposals (fixed / staged) | per proposal | "
            "power +5 / +10 / +20 (fixed) | (staged) | +10 after 10 no-ops (f / s) | trials per decision (f / s) |")
    lines = [head, "|" + "---|" * 9]
    for c in report["conditions"]:
        f, s = c["fixed"], c["staged"]
        pw = lambda g: " / ".join(f"{g['power_first_proposal'][x][0]:.2f}" for x in ("+5", "+10", "+20"))
        lines.append(
            f"| {c['flaky_share']:.0%} | {c['k']} | {c['n_validation']} | "
            f"{f['experiment_wise_false_accept']['30'][0]:.3f} / {s['experiment_wise_false_accept']['30'][0]:.3f} | "
            f"{f['false_accept_per_proposal']['30'][0]:.4f} / {s['false_accept_per_proposal']['30'][0]:.4f} | "
            f"{pw(f)} | {pw(s)} | {f['power_after_10_noops_+10'][0]:.2f} / {s['power_after_10_noops_+10'][0]:.2f} | "
            f"{f['validation_trials_per_decision']['null'][0]:.0f} / {s['validation_trials_per_decision']['null'][0]:.1f} "
            f"({s['trials_vs_fixed_k_x_n']:.2f}x) |")
    return "\n".join(lines)
