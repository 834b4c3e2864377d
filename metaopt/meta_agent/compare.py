"""`metaopt compare A B`: two runs, experiment candidates or imported Harbor jobs, task by task.

Each side's trials are paired by task id: a task's score is the mean of its scored trials (an
errored trial, status `error` or a NULL score, is left out and counted, never taken as 0). A task
not scored on both sides (not run on one, or only errored there) is listed and left out of the
test. The test is the gate's own: the exact stratified test the staged gate confirms with
(meta_agent.error_control; within each task A's and B's trials are exchangeable under "no
difference"), two-sided by doubling the smaller of its one-sided p-values. The interval is the
fixed gate's estimate (meta_agent.gate.decide): the mean change +- a Student-t quantile (n - 1
df) times its SE, the larger of the paired tasks' sample SE and the SE run-to-run noise alone
gives (the pooled within-task variance of both sides' repeated trials; assumed when every task
ran once), clipped to [-1, 1]. Read-only.

A name is, in this order: an experiment (its best candidate: the one its report names, else the
latest accepted, else the baseline), a candidate (`EXP/cN`: its validation and test trials, the
splits its rivals ran in full; train holds only the tasks its parent failed), a run id (an
experiment's `EXP/cN:SPLIT` runs included), or a Harbor job's name (run `harbor-NAME`).
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

from pydantic import BaseModel, ConfigDict

from metaopt.core.errors import NotFound
from metaopt.meta_agent import records
from metaopt.meta_agent.error_control import seed_for, stratified_p_value
from metaopt.meta_agent.gate import NoiseFloor, Scores, _scored, decide, t_quantile
from metaopt.meta_agent.ledger import Ledger
from metaopt.traces import queries
from metaopt.traces.store import Store

LEVEL = 0.95
"""Confidence of the interval; the verdict calls a difference shown when p <= 1 - LEVEL."""
DRAWS = 5000
"""Relabellings of the permutation test (scores other than 0/1), per direction: the gate's 20000
take 20 s on 100 tasks x 3 trials; 5000 still resolve p to about +-0.003 at 0.05, and the
p-value stays exactly valid for any number of draws (error_control._permutation_p)."""
CANDIDATE_SPLITS = ("validation", "test")
Kind = Literal["run", "candidate", "experiment", "harbor job"]


class Side(BaseModel):
    """One side of a comparison: what its name resolved to and the trial scores read."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """As given."""
    kind: Kind
    ref: str
    """The run id or candidate id whose trials were read."""
    agent: str | None
    """The trials' agent (oracle | nop | harness@model); None when they name several."""
    trials: int
    errors: int
    """Trials left out: status error or no score."""
    scores: Scores
    """Task id -> its trials' scores (None: errored)."""


class TaskRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str
    a: float
    b: float
    change: float
    """b - a."""


class Comparison(BaseModel):
    """Everything `metaopt compare` prints (and, with --json, dumps)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    a: Side
    b: Side
    tasks: list[TaskRow]
    """The paired tasks, by task id."""
    only_a: list[str]
    """A's tasks left out of the test: B did not run them, or one side has only errored trials there."""
    only_b: list[str]
    n: int
    mean_a: float | None
    """Mean over the paired tasks of A's per-task scores."""
    mean_b: float | None
    delta: float | None
    """mean_b - mean_a (= the mean per-task change)."""
    ci: tuple[float, float] | None
    """Interval of delta at `level` (t quantile x the gate's SE); None under 2 paired tasks."""
    level: float
    p_value: float | None
    """Two-sided; None without a paired task."""
    p_floor: float | None = None
    """0/1 scores, no difference shown: the smallest two-sided p the test could give these tasks
    (every trial that passed on either side moved to one side). Above 1 - level no outcome on
    these tasks could show a difference: too few tasks where the two sides can differ."""
    test: str
    better: Literal["a", "b"] | None
    """Which side the test shows better at 1 - level; None: no difference shown."""
    verdict: str


def _side(store: Store, name: str) -> Side:
    """Resolve `name` (see the module docstring). Raises NotFound naming it."""
    exp = Ledger(store, name).experiment()
    if exp is not None:
        best = (exp.result or {}).get("best_candidate") or _incumbent(store, name)
        return _read(store, name, "experiment", best, candidate=True)
    if records.candidate_row(store, name) is not None:
        return _read(store, name, "candidate", name, candidate=True)
    runs: tuple[tuple[Kind, str], ...] = (("run", name), ("harbor job", f"harbor-{name}"))
    for kind, run in runs:
        if queries.trial_scores(store, run_id=run):
            return _read(store, name, kind, run, candidate=False)
    raise NotFound(f"no run, experiment, candidate or Harbor job named {name!r} with trials in store {store.path} "
                   "(see `metaopt traces list` and `metaopt traces experiments`)")


def _incumbent(store: Store, experiment_id: str) -> str:
    """An experiment's best so far: its head (latest accepted), else its baseline."""
    ledger = Ledger(store, experiment_id)
    head = ledger.head()
    if head is not None:
        return head
    cands = ledger.candidates()
    if not cands:
        raise NotFound(f"experiment {experiment_id!r} has no candidate yet")
    return min(cands, key=lambda c: c.iteration).candidate_id


def _read(store: Store, name: str, kind: Kind, ref: str, candidate: bool) -> Side:
    rows = (queries.trial_scores(store, candidate_id=ref, splits=CANDIDATE_SPLITS) if candidate
            else queries.trial_scores(store, run_id=ref))
    if not rows:
        where = f" in its {' or '.join(CANDIDATE_SPLITS)} splits" if candidate else ""
        raise NotFound(f"{kind} {name!r} ({ref}) has no trials{where} in store {store.path}")
    scores: Scores = {}
    errors = 0
    for r in rows:
        score = None if r["status"] == "error" or r["score"] is None else float(r["score"])
        errors += score is None
        scores.setdefault(r["task_id"], []).append(score)
    agents = {r["agent"] for r in rows}
    return Side(name=name, kind=kind, ref=ref, agent=agents.pop() if len(agents) == 1 else None, trials=len(rows),
                errors=errors, scores=scores)


def compare(store: Store, a: str, b: str, level: float = LEVEL) -> Comparison:
    """Resolve `a` and `b` in the store and compare them. Raises NotFound (a UserError) for a name
    that matches nothing; read-only."""
    return compare_sides(_side(store, a), _side(store, b), level)


def compare_sides(a: Side, b: Side, level: float = LEVEL) -> Comparison:
    """The paired comparison of two sides' scores (pure; deterministic: the permutation test, used
    for scores other than 0/1, is seeded by the two refs, in either order)."""
    ma = {t: statistics.fmean(s) for t, tr in a.scores.items() if (s := _scored(tr))}
    mb = {t: statistics.fmean(s) for t, tr in b.scores.items() if (s := _scored(tr))}
    rows = [TaskRow(task=t, a=ma[t], b=mb[t], change=mb[t] - ma[t]) for t in sorted(ma.keys() & mb.keys())]
    n = len(rows)
    paired = {r.task for r in rows}
    only_a, only_b = sorted(a.scores.keys() - paired), sorted(b.scores.keys() - paired)
    if not n:
        return Comparison(a=a, b=b, tasks=rows, only_a=only_a, only_b=only_b, n=0, mean_a=None, mean_b=None,
                          delta=None, ci=None, level=level, p_value=None, test="none", better=None,
                          verdict=f"nothing to compare: no task was scored on both sides "
                                  f"(A scored {len(ma)}, B scored {len(mb)})")
    paired_a = {r.task: a.scores[r.task] for r in rows}
    paired_b = {r.task: b.scores[r.task] for r in rows}
    # the fixed gate's paired estimate: its SE is the larger of the tasks' sample SE and the SE that
    # run-to-run noise alone gives (the within-task variance of both sides' repeated trials; assumed
    # when every task ran once), so n identical changes do not make a zero-width interval
    noise = NoiseFloor.measure({f"{side}\x1f{t}": tr for side, sc in (("a", paired_a), ("b", paired_b))
                                for t, tr in sc.items()})
    gate = decide(paired_a, paired_b, noise)
    delta, ci = gate.delta, None
    if n >= 2:
        half = t_quantile(level, n - 1) * gate.se
        ci = (max(-1.0, delta - half), min(1.0, delta + half))
    seed = seed_for("compare", *sorted((a.ref, b.ref)))
    p_b, method = stratified_p_value(paired_b, paired_a, seed=seed, draws=DRAWS)  # B higher than A
    p_a, _ = stratified_p_value(paired_a, paired_b, seed=seed, draws=DRAWS)
    p = min(1.0, 2 * min(p_a, p_b))
    better: Literal["a", "b"] | None = None
    if p <= 1 - level:
        better = "b" if p_b <= p_a else "a"
    floor = _p_floor(paired_a, paired_b) if better is None and method.startswith("exact") else None
    return Comparison(a=a, b=b, tasks=rows, only_a=only_a, only_b=only_b, n=n,
                      mean_a=math.fsum(r.a for r in rows) / n, mean_b=math.fsum(r.b for r in rows) / n, delta=delta,
                      ci=ci, level=level, p_value=p, p_floor=floor, test=f"{method}, two-sided (twice the smaller one-sided p)",
                      better=better, verdict=_verdict(better, n, delta, ci, p, level, floor))


def _verdict(better: str | None, n: int, delta: float, ci: tuple[float, float] | None, p: float, level: float,
             floor: float | None) -> str:
    head = {"b": "B is better than A", "a": "B is worse than A", None: "no difference shown"}[better]
    tasks = f"{n} paired task{'s' if n != 1 else ''}"
    interval = f"{level:.0%} CI {ci[0]:+.2f} to {ci[1]:+.2f}" if ci else "no interval from 1 task"
    line = f"{head} on {tasks}: {delta:+.2f} ({interval}), p = {p_text(p)}"
    if floor is not None and floor > 1 - level:
        line += f"; these tasks cannot show one at {1 - level:.0%}: the test's smallest p on them is {p_text(floor)}"
    return line


def _p_floor(a: Scores, b: Scores) -> float:
    """The smallest two-sided p of the exact test on these 0/1 trials: in each task, the passes of
    both sides given to one side as far as its trials go, B's way and A's way."""
    def extreme(to: Scores, other: Scores) -> tuple[Scores, Scores]:
        got, rest = {}, {}
        for t in to:
            x, y = _scored(to[t]), _scored(other[t])
            wins = round(sum(x) + sum(y))
            mine = min(wins, len(x))
            got[t] = [1.0] * mine + [0.0] * (len(x) - mine)
            rest[t] = [1.0] * (wins - mine) + [0.0] * (len(y) - wins + mine)
        return got, rest

    return min(1.0, 2 * min(stratified_p_value(*extreme(b, a))[0], stratified_p_value(*extreme(a, b))[0]))


def p_text(p: float) -> str:
    """A p-value as people read it: 0.004, 0.412, 1.000; 3.1e-05 under 0.001."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"
