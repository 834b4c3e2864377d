"""The acceptance gate: keep a harness revision only when the validation score really rose.

Pure functions, no I/O, never raise on well-typed input. Scores are per-task trial scores in
[0, 1], higher is better; None marks a trial that errored (infra), which lowers coverage and is
never counted as 0. Two stages: `screen` (cheap, on train tasks the parent failed) and `decide`
(paired test on the validation tasks, against a noise floor measured from repeated baseline runs).

The optimizer screens with `screen`, then validates with the staged gate (meta_agent.sequential),
which controls the error of the whole experiment; `decide` controls one decision only and stays
as the fixed gate that perf/gate_simulation compares against.
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Scores = dict[str, list[float | None]]
"""Task id -> the K trials' scores in [0, 1] (higher is better); None = the trial errored."""


class CandidateScores(BaseModel):
    """A candidate's trial scores so far, per split (what the gate compares)."""

    model_config = ConfigDict(extra="forbid")
    train: Scores = Field(default_factory=dict)
    validation: Scores = Field(default_factory=dict)


def charged(parent: Scores, child: Scores) -> Scores:
    """The child's scores with its errored trials counted as failures (0) on every task where the
    parent had no error: an error the child brought is the child's failure, not missing data."""
    return {t: [0.0 if x is None and parent.get(t) and None not in parent[t] else x for x in trials]
            for t, trials in child.items()}


def mean(scores: Scores) -> float:
    """Mean over tasks of the per-task mean of scored trials (errors excluded); 0 when none."""
    per = [sum(s) / len(s) for s in ([x for x in v if x is not None] for v in scores.values()) if s]
    return sum(per) / len(per) if per else 0.0

ASSUMED_TASK_VARIANCE = 0.075
"""Per-task trial variance assumed when the floor cannot be measured (K = 1): binary tasks, 30% of
them flaky at p = 0.5 (variance 0.25), the rest deterministic -> 0.3 * 0.25 (optimizer-lessons §3)."""


def _scored(trials: list[float | None]) -> list[float]:
    return [s for s in trials if s is not None]


def _var(xs: list[float]) -> float:
    """Sample variance (n - 1) in plain floats: statistics.variance is exact but ~50x slower."""
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


class NoiseFloor(BaseModel):
    """Run-to-run noise of one harness, measured by running the baseline K times on the same tasks."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    per_task_var: dict[str, float]
    """Sample variance across trials, per task with >= 2 scored trials."""
    pooled_var: float
    """Within-task variance pooled over tasks (weighted by degrees of freedom), or the assumed one."""
    flaky_share: float
    """Share of measured tasks whose trials disagree (variance > 0)."""
    k: int
    """Most trials any baseline task had (the design K)."""
    n_tasks: int
    """Tasks that contributed a variance."""
    measured: bool
    """False when no task had 2 scored trials (K = 1): pooled_var is ASSUMED_TASK_VARIANCE."""

    @classmethod
    def measure(cls, baseline: Scores) -> NoiseFloor:
        """Floor from the baseline harness run K times. Never raises."""
        per_task = {t: _var(s) for t, tr in baseline.items() if len(s := _scored(tr)) >= 2}
        dof = sum(len(_scored(baseline[t])) - 1 for t in per_task)
        measured = dof > 0
        pooled = (
            sum(v * (len(_scored(baseline[t])) - 1) for t, v in per_task.items()) / dof
            if measured else ASSUMED_TASK_VARIANCE
        )
        flaky = sum(v > 1e-12 for v in per_task.values()) / len(per_task) if per_task else 0.0
        k = max((len(tr) for tr in baseline.values()), default=0)
        return cls(per_task_var=per_task, pooled_var=pooled, flaky_share=flaky, k=k,
                   n_tasks=len(per_task), measured=measured)

    def se_of_delta(self, n_tasks: int, k: float) -> float:
        """SE of a paired mean difference over n_tasks, K trials a side, from run-to-run noise alone:
        sqrt(2 * pooled_var / (k * n)). k may be fractional (harmonic mean of uneven trial counts)."""
        if n_tasks <= 0 or k <= 0:
            return 0.0
        return math.sqrt(2.0 * self.pooled_var / (k * n_tasks))


class GateRule(BaseModel):
    """When a child harness counts as better than its parent on the validation tasks."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    min_effect: float = Field(default=0.05, ge=0.0, le=1.0)
    """Smallest validation gain worth keeping, in score units (0.05 = 5 points)."""
    z: float = Field(default=1.645, gt=0.0)
    """The gain must exceed z standard errors (1.645: one-sided 95%)."""
    min_coverage: float = Field(default=0.6, ge=0.0, le=1.0)
    """Share of validation tasks that must be scored for both parent and child, else inconclusive."""
    min_tasks: int = Field(default=3, ge=2)
    """Fewest paired tasks a decision may rest on, else inconclusive."""


def rule_text(rule: GateRule = GateRule()) -> str:
    """The gate rule as one paragraph (README and every gate_decisions row carry it)."""
    return (
        "A child harness is accepted only if, on the held-out validation tasks, its mean per-task "
        "score minus its parent's (paired over the tasks both scored; each task's score is the mean "
        "of its scored trials, errored trials are dropped, never counted as 0) is at least "
        f"min_effect = {rule.min_effect:.3f} and greater than z = {rule.z:.3f} standard errors. "
        "The standard error is the larger of the sample SE of the per-task differences and the SE "
        "that run-to-run noise alone would give, sqrt(2 * pooled within-task variance / (K * n)), "
        "measured from repeated baseline runs (assumed "
        f"{ASSUMED_TASK_VARIANCE} per task when the baseline ran once). If fewer than "
        f"{rule.min_coverage:.0%} of the validation tasks, or fewer than {rule.min_tasks} tasks, "
        "were scored for both, the outcome is inconclusive whatever the gain; otherwise it is reject."
    )


class Decision(BaseModel):
    """One gate decision; serialisable to JSON for the gate_decisions table."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    outcome: Literal["accept", "reject", "inconclusive"]
    delta: float
    """Mean paired per-task gain, child minus parent (higher is better)."""
    se: float
    """max(sample SE of the per-task gains, noise-floor SE)."""
    z: float
    threshold: float
    """max(min_effect, z * se): the gain must reach it (and strictly exceed z * se)."""
    n_tasks: int
    """Validation tasks scored for both parent and child."""
    n_validation: int
    """Validation tasks named by either side (the coverage denominator)."""
    k_parent: int
    k_child: int
    coverage: float
    noise: NoiseFloor
    per_task: dict[str, float]
    """Task -> child mean minus parent mean."""
    rule: GateRule
    reason: str

    def rule_text(self) -> str:
        return rule_text(self.rule)


def _k_label(kp: int, kc: int) -> str:
    return f"K={kp}" if kp == kc else f"K={kp}/{kc} (parent/child)"


def decide(parent: Scores, child: Scores, noise: NoiseFloor, rule: GateRule = GateRule()) -> Decision:
    """Paired validation test of child against parent. Never raises."""
    tasks = sorted(set(parent) | set(child))
    per_task: dict[str, float] = {}
    inv_k = 0.0  # sum over tasks of 1/k_parent_i + 1/k_child_i: the exact noise-floor variance factor
    for t in tasks:
        p, c = _scored(parent.get(t, [])), _scored(child.get(t, []))
        if p and c:
            per_task[t] = statistics.fmean(c) - statistics.fmean(p)
            inv_k += 1 / len(p) + 1 / len(c)
    n, total = len(per_task), len(tasks)
    d = list(per_task.values())
    delta = statistics.fmean(d) if d else 0.0
    sample_se = math.sqrt(_var(d) / n) if n >= 2 else 0.0
    k_eff = 2 * n / inv_k if inv_k else 0.0
    se = max(sample_se, noise.se_of_delta(n, k_eff))
    threshold = max(rule.min_effect, rule.z * se)
    coverage = n / total if total else 0.0
    kp = max((len(v) for v in parent.values()), default=0)
    kc = max((len(v) for v in child.values()), default=0)
    where = f"on {n}/{total} tasks ({coverage:.0%} coverage), {_k_label(kp, kc)}"
    if not noise.measured:
        where += f", noise floor assumed ({ASSUMED_TASK_VARIANCE} per task: baseline had K=1)"
    if coverage < rule.min_coverage or n < rule.min_tasks:
        outcome = "inconclusive"
        reason = (f"inconclusive: only {n}/{total} validation tasks ({coverage:.0%}) were scored for "
                  f"both parent and child; the rule needs {rule.min_coverage:.0%} and at least "
                  f"{rule.min_tasks} tasks (gain {delta:+.3f} not judged), {_k_label(kp, kc)}")
    else:
        ok = delta >= rule.min_effect and delta > rule.z * se
        outcome = "accept" if ok else "reject"
        reason = (f"{outcome}: validation gain {delta:+.3f} {'>=' if ok else '<'} max(min effect "
                  f"{rule.min_effect:.3f}, {rule.z:.3f} x SE {se:.3f} = {rule.z * se:.3f}) {where}")
    return Decision(outcome=outcome, delta=delta, se=se, z=rule.z, threshold=threshold, n_tasks=n,
                    n_validation=total, k_parent=kp, k_child=kc, coverage=coverage, noise=noise,
                    per_task=per_task, rule=rule, reason=reason)


class Screen(BaseModel):
    """The cheap first stage, on the train tasks the parent failed."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    outcome: Literal["pass", "fail"]
    parent_mean: float
    child_mean: float
    n_tasks: int
    """Failing tasks scored on both sides."""
    worse: int
    """Tasks where the child's mean is below the parent's."""
    per_task: dict[str, float]
    reason: str


def screen(parent: Scores, child: Scores, failing: list[str]) -> Screen:
    """Pass iff, over the `failing` tasks scored on both sides, the child's mean is strictly higher
    than the parent's and the child is worse on at most half of them. Never raises."""
    pairs = {t: (statistics.fmean(p), statistics.fmean(c)) for t in dict.fromkeys(failing)
             if (p := _scored(parent.get(t, []))) and (c := _scored(child.get(t, [])))}
    n = len(pairs)
    pm = statistics.fmean(p for p, _ in pairs.values()) if n else 0.0
    cm = statistics.fmean(c for _, c in pairs.values()) if n else 0.0
    worse = sum(c < p for p, c in pairs.values())
    ok = n > 0 and cm > pm and worse <= n / 2
    if n == 0:
        why = f"none of the {len(failing)} failing train tasks was scored on both sides"
    else:
        why = (f"child mean {cm:.3f} {'>' if cm > pm else '<='} parent mean {pm:.3f} on {n} failing "
               f"train tasks, worse on {worse}/{n} ({'<=' if worse <= n / 2 else '>'} half)")
    return Screen(outcome="pass" if ok else "fail", parent_mean=pm, child_mean=cm, n_tasks=n,
                  worse=worse, per_task={t: c - p for t, (p, c) in pairs.items()},
                  reason=f"{'pass' if ok else 'fail'}: {why}")


def _t_two_sided_cdf(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer df (Abramowitz & Stegun 26.7.3-4, exact)."""
    th = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(th), math.cos(th) ** 2
    if df % 2 == 0:
        term = total = 1.0
        for j in range(1, df // 2):
            term *= c2 * (2 * j - 1) / (2 * j)
            total += term
        return s * total
    if df == 1:
        return 2 * th / math.pi
    term = total = math.cos(th)
    for j in range(1, (df - 1) // 2):
        term *= c2 * (2 * j) / (2 * j + 1)
        total += term
    return 2 / math.pi * (th + s * total)


def t_quantile(level: float, df: int) -> float:
    """The t with P(|T| < t) = level (two-sided), by bisection on the exact CDF; normal above df 300."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must lie strictly between 0 and 1, got {level}")
    if df > 300:
        return statistics.NormalDist().inv_cdf(0.5 + level / 2)
    lo, hi = 0.0, 2.0
    while _t_two_sided_cdf(hi, df) < level:
        lo, hi = hi, hi * 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_two_sided_cdf(mid, df) < level else (lo, mid)
    return (lo + hi) / 2


def confidence_interval(scores: Scores, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): mean of per-task means (tasks with >= 1 scored trial) and a Student-t
    interval over tasks (df = n - 1; tasks are the sampling unit, trials only sharpen each task's
    mean), clipped to [0, 1]. Fewer than 2 tasks: the interval is the whole range [0, 1] (mean is
    nan with no task). Raises ValueError only for a level outside (0, 1)."""
    means = [statistics.fmean(s) for tr in scores.values() if (s := _scored(tr))]
    if len(means) < 2:
        return (means[0] if means else math.nan, 0.0, 1.0)
    m = statistics.fmean(means)
    half = t_quantile(level, len(means) - 1) * math.sqrt(_var(means) / len(means))
    return m, max(0.0, m - half), min(1.0, m + half)
