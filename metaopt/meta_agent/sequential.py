"""Sequential validation: select on the reused validation trials, stopping early, then confirm on
fresh trials at the alpha the experiment can still spend.

    selection     the child runs on the validation tasks one round (one trial per task) at a
                  time, round 1 in growing shares of the tasks (halves at K = 3, fifths at
                  K = 1: selection_plan); after each look it stops if it is not ahead of its
                  parent by enough (futility), and it goes on to confirmation if, with all K
                  rounds in, its gain is >= min_effect and >= select_z noise-floor SEs (or, early,
                  >= early_z). It compares with the parent's validation trials, which every child
                  of that parent reuses: so it only *chooses* what to confirm, and spends no alpha.
    confirmation  the child runs confirm_rounds fresh trials per task; the parent runs a reserve of
                  reserve_ratio x as many, trials that no selection ever looks at. The exact
                  stratified test (meta_agent.error_control) decides at each look, at a share of
                  alpha_j, the level the experiment's j-th confirmation gets; an interim look stops
                  for efficacy (its p <= its share) or futility (p > futility_p).

The error guarantee rests on the confirmation alone (see error_control), so selection may stop,
pass early or look as often as it likes. Pure: trials come in through callables the caller passes
(the optimizer's evaluate; a simulation's sampler), decisions go out as `Look` records.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from metaopt.meta_agent.error_control import (
    AlphaSpending,
    GainEstimate,
    conditional_estimate,
    seed_for,
    stratified_p_value,
    z_critical,
)
from metaopt.meta_agent.gate import NoiseFloor, Scores, _scored, _var
from metaopt.meta_agent.task_order import selection_order, selection_plan

Outcome = Literal["continue", "futile", "pass", "reject", "inconclusive", "accept"]


class SequentialRule(BaseModel):
    """The staged gate's settings; stored with the experiment's config and used again on resume."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Experiment-wise: P(the experiment accepts anything | no candidate is really better) <= alpha."""
    spend: float = Field(default=0.8, gt=0.0, le=1.0)
    """Each confirmation gets this share of the alpha still unspent: alpha_j = alpha s (1 - s)^(j-1)."""
    min_effect: float = Field(default=0.05, ge=0.0, le=1.0)
    """Smallest selection gain worth confirming, in score units (0.05 = 5 points)."""
    select_z: float = 0.8
    """With all K rounds in, the selection gain must be >= select_z noise-floor SEs."""
    futility_z: float = 0.875
    """A selection look at information t (trials so far / K n) stops when z < futility_z sqrt(t)."""
    select_looks: int = Field(default=5, ge=1)
    """How finely round 1 of selection is cut: into max(2, ceil(select_looks / K)) growing shares
    of the tasks (selection_plan), so a small K still gets several chances to stop a candidate
    that is not ahead (K = 1: fifths; K = 3: halves, as before this field existed)."""
    min_share: int = Field(default=2, ge=1)
    """Fewest tasks a look at a share of round 1 may rest on: a smaller share is skipped (a
    futility stop on one task drops every gain that is not on that task). 3 costs K = 1 on 10
    tasks 0.84-0.90x K x n in the simulation, against 0.52-0.60x with 2."""
    shuffle_tasks: bool = True
    """Each candidate's selection takes the validation tasks in its own seeded order (seeded_by),
    so the shares round 1 looks at are random, not the same alphabetical prefix for every child."""
    stratify: bool = True
    """That order spreads the tasks the parent passed in every trial (where a child can only lose)
    in proportion through it, so no share of round 1 is only such tasks: a share like that shows no
    gain, and its futility stop would drop any candidate, however good (selection_order)."""
    seeded_by: Literal["run_seed", "candidate_id"] = "run_seed"
    """What a candidate's seeded draws (its selection order, its permutation tests) derive from:
    run_seed, the experiment's --seed and the candidate's position in it (c1, c2, ...), so two runs
    with the same seed draw the same; candidate_id, its full id, which carries the experiment's
    start time (experiments stored before this field resume with it)."""
    early_z: float = Field(default=3.0, gt=0.0)
    """A selection look on all tasks passes early when z >= early_z (and the gain >= min_effect)."""
    confirm_rounds: int | None = Field(default=None, ge=1)
    """Fresh child trials per task in the confirmation; None: 4 K."""
    reserve_ratio: float = Field(default=2.0, ge=1.0)
    """Parent reserve trials per child confirmation trial (the reserve is shared by all of the
    parent's children and grows only as far as a confirmation needs)."""
    looks: tuple[float, ...] = (1 / 6, 1 / 2, 1.0)
    """Confirmation looks, as fractions of confirm_rounds (all of them is always the last look)."""
    interim_share: float = Field(default=0.1, ge=0.0, lt=1.0)
    """Share of alpha_j the interim looks spend together (split evenly); the last look gets the rest."""
    futility_p: float = Field(default=0.5, gt=0.0, le=1.0)
    """An interim confirmation look stops for futility when its p-value is above this."""
    min_coverage: float = Field(default=0.6, ge=0.0, le=1.0)
    """Share of validation tasks that must be scored on both sides at a final look, else inconclusive."""
    min_tasks: int = Field(default=3, ge=2)
    """Fewest tasks scored on both sides that a final look may rest on, else inconclusive."""

    @model_validator(mode="before")
    @classmethod
    def _stored_before(cls, data: Any) -> Any:
        """A rule stored by an earlier version (a full dump, so every field it had is present)
        resumes with the selection plan it started with: the fields added since take the values
        that plan had (round 1 in halves, the tasks in the given order, not stratified, seeded by id)."""
        if isinstance(data, dict) and set(cls.model_fields) - set(ADDED_LATER) <= set(data):
            data = {**{k: v for k, v in ADDED_LATER.items() if k not in data}, **data}
        return data

    def draw_label(self, candidate_id: str, seed: int, iteration: int) -> str:
        """The label the candidate's seeded draws derive from (seeded_by): never the experiment id
        under run_seed, so the same seed and position give the same draws in any experiment."""
        return candidate_id if self.seeded_by == "candidate_id" else f"seed {seed}: c{iteration}"

    def rounds(self, k: int) -> int:
        return self.confirm_rounds or 4 * k

    def confirm_plan(self, k: int) -> list[tuple[int, int]]:
        """(child rounds, parent reserve rounds) at each confirmation look."""
        kc = self.rounds(k)
        child = sorted({max(1, min(kc, round(f * kc))) for f in self.looks} | {kc})
        return [(c, math.ceil(self.reserve_ratio * c - 1e-9)) for c in child]

    def look_level(self, alpha_j: float, look: int, n_looks: int) -> float:
        """The share of alpha_j spent at confirmation look `look` (1-based) of `n_looks`."""
        if n_looks == 1:
            return alpha_j
        if look < n_looks:
            return alpha_j * self.interim_share / (n_looks - 1)
        return alpha_j * (1.0 - self.interim_share)


ADDED_LATER = {"select_looks": 2, "min_share": 1, "shuffle_tasks": False, "stratify": False,
               "seeded_by": "candidate_id"}
"""Fields added to the rule after it was first stored, with the values that earlier plan had."""


def rule_text(rule: SequentialRule = SequentialRule(), k: int = 3) -> str:
    """The rule as one paragraph (the README and every gate_decisions row carry it)."""
    plan = rule.confirm_plan(k)
    order = ", taken in the candidate's own seeded order" if rule.shuffle_tasks else ""
    if rule.shuffle_tasks and rule.seeded_by == "run_seed":
        order += " (drawn from the run's seed and its position)"
    if rule.shuffle_tasks and rule.stratify:
        order += " with the tasks its parent always passed spread through it in proportion"
    return (
        f"Staged gate, experiment-wise alpha = {rule.alpha:g}. Selection (spends no alpha): the child runs "
        f"on the validation tasks one trial per task at a time (up to K = {k} rounds; round 1 in "
        f"{max(2, math.ceil(rule.select_looks / k))} growing shares of the tasks{order}; a share under "
        f"{rule.min_share} tasks is skipped), "
        "compared with its parent's validation trials; each look stops for futility when the gain is below "
        f"{rule.futility_z:g} x sqrt(share of the K rounds run) noise-floor SEs; with all rounds in it passes "
        f"when the gain is >= min_effect = {rule.min_effect:g} and >= {rule.select_z:g} SE (early: >= "
        f"{rule.early_z:g} SE). Confirmation: the child runs {plan[-1][0]} fresh trials per task and the parent "
        f"a reserve of {rule.reserve_ratio:g}x as many that no selection ever saw; the j-th confirmation of the "
        f"experiment is tested at alpha_j = {rule.alpha:g} x {rule.spend:g} x {1 - rule.spend:g}^(j-1) (the "
        "alpha_j sum to at most alpha, so an experiment in which no candidate is better accepts anything "
        "with probability <= alpha) by the exact stratified test (per task, child and parent trials "
        f"exchangeable), looking after {', '.join(str(c) for c, _ in plan)} child trials per task: the interim "
        f"looks share {rule.interim_share:.0%} of alpha_j (and stop for futility when p > {rule.futility_p:g}), "
        "the last gets the rest. Errored trials are dropped, never counted as 0; below "
        f"{rule.min_coverage:.0%} of the tasks, or {rule.min_tasks} tasks, scored on both sides a final look is "
        "inconclusive."
    )


class Look(BaseModel):
    """One decision point; becomes one gate_decisions row."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    stage: Literal["select", "confirm"]
    look: int
    """1-based within the stage."""
    outcome: Outcome
    delta: float
    """Mean per-task gain, child minus parent, over the tasks both sides scored."""
    se: float
    """select: from the baseline's noise floor; confirm: from the within-task variance of the
    confirmation's own trials (the exact test does not use it; the estimate and the reason do)."""
    z: float | None
    """delta / se; None when se is 0 (then any gain counts as infinitely many SEs)."""
    threshold: float
    """select: the z the look needed to pass; confirm: the p-value level of this look."""
    n_tasks: int
    n_validation: int
    coverage: float
    child_trials: int
    """Child trials per task at this look (the most any task had)."""
    parent_trials: int
    p_value: float | None = None
    method: str | None = None
    j: int | None = None
    """Which confirmation of the experiment this is (confirm looks)."""
    alpha_j: float | None = None
    alpha_spent: float = 0.0
    """Experiment alpha committed once this look was taken (selection looks spend none)."""
    estimate: GainEstimate | None = None
    """On the look that accepts: the gain, selection taken into account."""
    reason: str


class Verdict(BaseModel):
    """How a candidate's validation ended."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    outcome: Literal["accept", "reject", "inconclusive", "invalid"]
    """invalid: the child's own trials refused it (validate's `check`); its looks so far are kept."""
    looks: list[Look]
    trials_run: int
    """Validation trials this decision ran: child selection + child confirmation + new parent reserve."""
    trials_max: int
    """What the stages it entered would have run had none of their looks stopped early: K n for
    selection, plus, once a confirmation began, its full child trials and the reserve trials it
    would have added. trials_max - trials_run is the budget the early stops saved."""
    estimate: GainEstimate | None
    spending: AlphaSpending
    reason: str


def _compare(parent: Scores, child: Scores, tasks: list[str]) -> tuple[float, dict[str, float], float, int, int]:
    """(delta, per-task gains, sum over tasks of 1/k_parent + 1/k_child, max k child, max k parent)."""
    per, inv, kc, kp = {}, [], 0, 0
    for t in tasks:
        p, c = _scored(parent.get(t, [])), _scored(child.get(t, []))
        if p and c:
            per[t] = sum(c) / len(c) - sum(p) / len(p)
            inv.append(1 / len(p) + 1 / len(c))
            kc, kp = max(kc, len(c)), max(kp, len(p))
    delta = math.fsum(per.values()) / len(per) if per else 0.0
    return delta, per, math.fsum(inv), kc, kp  # fsum: the same in any task order (a z on a bound stays on it)


def _se(noise: NoiseFloor, per: dict[str, float], inv_k: float) -> float:
    """Noise-floor SE of the mean gain (sqrt(pooled var x sum(1/k_p + 1/k_c)) / n); when the floor
    was assumed (baseline K = 1), never below the sample SE of the per-task gains."""
    n = len(per)
    if not n:
        return 0.0
    se = math.sqrt(noise.pooled_var * inv_k) / n
    if not noise.measured and n >= 2:
        se = max(se, math.sqrt(_var(list(per.values())) / n))
    return se


def _within_var(samples: list[list[float | None]]) -> float | None:
    """Within-task trial variance pooled over samples (dof-weighted); None without 2 scored trials."""
    num = dof = 0.0
    for xs in samples:
        x = _scored(xs)
        if len(x) >= 2:
            num += _var(x) * (len(x) - 1)
            dof += len(x) - 1
    return num / dof if dof else None


def _z(delta: float, se: float) -> float:
    return delta / se if se > 0 else (math.inf if delta > 0 else 0.0)


def _finite(z: float) -> float | None:
    return z if math.isfinite(z) else None


def select_look(parent: Scores, child: Scores, noise: NoiseFloor, tasks: list[str], look: int, info: float,
                final: bool, rule: SequentialRule, n_validation: int) -> Look:
    """One selection look over `tasks` at information `info` (child trials so far / K n). Never raises."""
    delta, per, inv_k, kc, kp = _compare(parent, child, tasks)
    n = len(per)
    se = _se(noise, per, inv_k)
    z = _z(delta, se)
    coverage = n / len(tasks) if tasks else 0.0
    big = delta >= rule.min_effect
    where = f"{n}/{len(tasks)} tasks, {kc} child / {kp} parent trials per task"
    if final:
        if coverage < rule.min_coverage or n < rule.min_tasks:
            out: Outcome = "inconclusive"
            why = (f"inconclusive: only {n}/{len(tasks)} tasks ({coverage:.0%}) scored on both sides; the rule needs "
                   f"{rule.min_coverage:.0%} and {rule.min_tasks}")
        else:
            out = "pass" if big and z >= rule.select_z else "reject"
            why = (f"{out}: gain {delta:+.3f} ({z:.2f} SE, SE {se:.3f}) {'meets' if out == 'pass' else 'misses'} "
                   f">= {rule.min_effect:g} and >= {rule.select_z:g} SE on {where}")
        bound = rule.select_z
    else:
        bound = rule.futility_z * math.sqrt(info)
        if len(tasks) == n_validation and big and z >= rule.early_z and coverage >= rule.min_coverage:
            out, why = "pass", f"early pass: gain {delta:+.3f} = {z:.2f} SE >= {rule.early_z:g} SE on {where}"
        elif z < bound:
            out, why = "futile", f"futility: gain {delta:+.3f} = {z:.2f} SE < {bound:.2f} SE on {where}"
        else:
            out, why = "continue", f"continue: gain {delta:+.3f} = {z:.2f} SE >= {bound:.2f} SE on {where}"
    return Look(stage="select", look=look, outcome=out, delta=delta, se=se, z=_finite(z), threshold=bound, n_tasks=n,
                n_validation=n_validation, coverage=coverage, child_trials=kc, parent_trials=kp,
                reason=f"select look {look}: {why}; selection spends no alpha")


def confirm_look(reserve: Scores, child: Scores, noise: NoiseFloor, tasks: list[str], look: int, n_looks: int,
                 j: int, alpha_j: float, spent: float, rule: SequentialRule, seed: int) -> Look:
    """One confirmation look: child's fresh trials vs the parent's reserve. Never raises."""
    delta, per, inv_k, kc, kp = _compare(reserve, child, tasks)
    n = len(per)
    within = _within_var([child[t] for t in per] + [reserve[t] for t in per])
    se = math.sqrt(within * inv_k) / n if within is not None and n else _se(noise, per, inv_k)
    p, method = stratified_p_value({t: child[t] for t in per}, {t: reserve[t] for t in per}, seed=seed)
    level = rule.look_level(alpha_j, look, n_looks)
    coverage = n / len(tasks) if tasks else 0.0
    last = look == n_looks
    scored = coverage >= rule.min_coverage and n >= rule.min_tasks
    if scored and p <= level and delta > 0:
        out: Outcome = "accept"
    elif last:
        out = "reject" if scored else "inconclusive"
    elif n == 0:  # no confirmation trial scored on both sides (errors, a spent budget): nothing to judge
        out = "inconclusive"
    else:
        out = "futile" if p > rule.futility_p else "continue"
    verb = {"accept": "accept", "reject": "reject", "futile": "futility stop", "continue": "continue",
            "inconclusive": "inconclusive"}[out]
    cover = "" if scored else f"; only {n}/{len(tasks)} tasks scored on both sides"
    reason = (f"confirm look {look}/{n_looks}: {verb}: p = {p:.4g} {'<=' if p <= level else '>'} {level:.4g} "
              f"(confirmation {j} of the experiment, alpha_j = {alpha_j:.4g}; {spent:.4g} of alpha "
              f"{rule.alpha:g} committed); fresh gain {delta:+.3f} (SE {se:.3f}) on {n}/{len(tasks)} tasks, "
              f"{kc} child / {kp} reserve trials per task; {method}{cover}")
    return Look(stage="confirm", look=look, outcome=out, delta=delta, se=se, z=_finite(_z(delta, se)), threshold=level,
                n_tasks=n, n_validation=len(tasks), coverage=coverage, child_trials=kc, parent_trials=kp,
                p_value=p, method=method, j=j, alpha_j=alpha_j, alpha_spent=spent, reason=reason)


def validate(candidate: str, tasks: list[str], parent_val: Scores, noise: NoiseFloor, k: int,
             rule: SequentialRule, spending: AlphaSpending, *,
             child: Callable[[list[str], int], Scores], confirm: Callable[[int], Scores],
             reserve: Callable[[int], Scores], reserve_have: int = 0,
             on_look: Callable[[Look], None] = lambda look: None, label: str | None = None,
             check: Callable[[], str | None] = lambda: None, begin: Callable | None = None) -> Verdict:
    """Run a candidate's validation to its end. `child(tasks, r)`: the child's validation scores on
    `tasks` with r trials each; `confirm(r)`: its confirmation scores on all tasks, r fresh trials
    each; `reserve(r)`: the parent's reserve, r trials per task; `reserve_have`: reserve trials per
    task that already exist (for the trial count). Each callable may be asked again for more: it
    returns what it ran before plus what is new. `on_look` sees each Look as it is decided, before
    any further trial runs. `label`: what the seeded draws (task order, permutation tests) derive
    from (SequentialRule.draw_label; default `candidate`). `check()`, asked each time the child's
    trials for a look are in (before the look is taken): why the child is invalid (a tampered trial),
    which ends the validation with outcome `invalid`, or None. Deterministic given the trials and
    the label; raises only what the callables raise. `begin(candidate)`, asked before the first fresh
    trial: the alpha state once the confirmation began (default `spending.begin`; meta_agent.swarm)."""
    n, label = len(tasks), label or candidate
    looks: list[Look] = []
    plan = selection_plan(selection_order(label, tasks, rule, parent_val), k, rule.select_looks, rule.min_share)
    run_sel = 0
    sel: Look | None = None
    for i, (subset, r) in enumerate(plan, 1):
        c = child(subset, r)
        if why := check():
            return _invalid(why, looks, spending)
        run_sel = (r - 1) * n + len(subset)
        sel = select_look(parent_val, c, noise, subset, i, run_sel / (k * n), i == len(plan), rule, n)
        looks.append(sel)
        on_look(sel)
        if sel.outcome != "continue":
            break
    assert sel is not None
    cplan = rule.confirm_plan(k)
    trials_max = k * n
    if sel.outcome != "pass":
        outcome = "inconclusive" if sel.outcome == "inconclusive" else "reject"
        return Verdict(outcome=outcome, looks=looks, trials_run=run_sel, trials_max=trials_max, estimate=None,
                       spending=spending, reason=f"{outcome}: {sel.reason}")
    trials_max += cplan[-1][0] * n + max(0, cplan[-1][1] - reserve_have) * n
    spending = begin(candidate) if begin is not None else spending.begin(candidate)
    j = spending.index(candidate)
    alpha_j = spending.level(j)
    last: Look | None = None
    run_conf = run_res = 0
    for i, (kc, kr) in enumerate(cplan, 1):
        c = confirm(kc)
        if why := check():  # before the parent's reserve runs: an invalid child costs it nothing
            return _invalid(why, looks, spending)
        p = reserve(kr)
        run_conf, run_res = kc * n, max(0, kr - reserve_have) * n
        last = confirm_look(p, c, noise, tasks, i, len(cplan), j, alpha_j, spending.spent, rule,
                            seed_for(label, "confirm", i))
        if last.outcome == "accept":
            last = last.model_copy(update={"estimate": conditional_estimate(
                last.delta, last.se, z_critical(last.threshold), selection_gain=sel.delta)})
        looks.append(last)
        on_look(last)
        if last.outcome != "continue":
            break
    assert last is not None
    run = run_sel + run_conf + run_res
    if last.outcome != "accept":
        outcome = "inconclusive" if last.outcome == "inconclusive" else "reject"
        return Verdict(outcome=outcome, looks=looks, trials_run=run, trials_max=trials_max, estimate=None,
                       spending=spending, reason=f"{outcome}: {last.reason}")
    return Verdict(outcome="accept", looks=looks, trials_run=run, trials_max=trials_max, estimate=last.estimate,
                   spending=spending, reason=f"accept: {last.reason}")


def _invalid(why: str, looks: list[Look], spending: AlphaSpending) -> Verdict:
    return Verdict(outcome="invalid", looks=looks, trials_run=0, trials_max=0, estimate=None, spending=spending,
                   reason=f"invalid: {why}")
