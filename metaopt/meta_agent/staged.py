"""The staged gate inside an experiment: meta_agent.sequential.validate wired to the store.

Trials go through the experiment's own `evaluate` (idempotent per candidate, split, task and
attempt), so a resumed experiment reruns no trial and replays the same looks; each look becomes
one gate_decisions row (written once: a resume skips rows already there); the experiment's alpha
is rebuilt from its confirm rows every time, so a resume spends exactly what an uninterrupted run
would; trials a stopped look did not run are booked as `saved` in the budget ledger. A candidate's seeded
draws come from the run's seed and its iteration (SequentialRule.draw_label), not its id, so two
runs with the same seed decide alike whatever their experiment ids.

Splits: `validation` holds the child's selection trials, `confirm` its fresh confirmation
trials, `reserve` a parent's trials for its children's confirmations (never used to select).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metaopt.meta_agent.error_control import AlphaSpending
from metaopt.meta_agent.gate import NoiseFloor, Scores
from metaopt.meta_agent.records import Candidate, GateDecision
from metaopt.meta_agent.sequential import Look, SequentialRule, Verdict, validate

if TYPE_CHECKING:
    from metaopt.meta_agent.optimize import Experiment


def spending(exp: Experiment) -> AlphaSpending:
    """The experiment's alpha state, from its confirm rows in candidate order."""
    order = {c.candidate_id: c.iteration for c in exp.ledger.candidates()}
    rows = exp.store.select(GateDecision, "experiment_id = ? AND stage = 'confirm'", [exp.id])
    rows.sort(key=lambda d: (order.get(d.candidate_id, 1 << 30), d.decided_at))
    return AlphaSpending.from_rows([d.model_dump() for d in rows], alpha=exp.cfg.gate.alpha, spend=exp.cfg.gate.spend)


def accepted_look(exp: Experiment, cid: str) -> Look | None:
    """The confirm look that accepted `cid` (its details hold the Look), or None."""
    rows = exp.store.select(GateDecision, "experiment_id = ? AND candidate_id = ? AND stage = 'confirm' "
                            "AND outcome = 'accept'", [exp.id, cid])
    return Look.model_validate(rows[-1].details) if rows and rows[-1].details else None


def record(exp: Experiment, c: Candidate, k: int) -> Scores:
    """The validation record `c`'s children are selected against: its K validation trials for the
    baseline (and for candidates the fixed gate accepted), its confirmation trials up to the look
    that accepted it for a candidate the staged gate accepted. Runs no trial that did not run."""
    val = exp.splits["validation"]
    look = accepted_look(exp, c.candidate_id)
    if look is None:
        return exp.evaluate(c.candidate_id, c.harness, "validation", val, k)[0]
    return exp.evaluate(c.candidate_id, c.harness, "confirm", val, look.child_trials)[0]


def judge(exp: Experiment, c: Candidate, parent: Candidate, parent_val: Scores, noise: NoiseFloor, k: int,
          rule: str) -> tuple[Verdict, Scores]:
    """Validate `c` against `parent` with the staged gate: (verdict, the validation scores `c` is
    remembered by). Writes the look rows and the saved-trials row."""
    cid, pid, val = c.candidate_id, parent.candidate_id, exp.splits["validation"]
    written = {(d.stage, (d.details or {}).get("look")) for d in exp.store.select(
        GateDecision, "experiment_id = ? AND candidate_id = ?", [exp.id, cid])}

    def on_look(look: Look) -> None:
        if (look.stage, look.look) in written:
            return  # resumed: this look was decided (and written) before the interruption
        first_confirm = look.stage == "confirm" and look.look == 1
        exp.ledger.decision(cid, pid, look.stage, look.outcome, look.reason, rule, delta=look.delta, se=look.se,
                            threshold=look.threshold, n_tasks=look.n_tasks, coverage=look.coverage,
                            details=look.model_dump(mode="json"),
                            alpha_spent=look.alpha_j if first_confirm else 0.0)
        exp.say(f"  {look.reason}")

    reserve = exp.ledger.trials(pid, "reserve")
    have = min((sum(r.task_id == t for r in reserve) for t in val), default=0)
    v = validate(cid, val, parent_val, noise, k, exp.cfg.gate, spending(exp),
                 child=lambda ts, r: exp.evaluate(cid, c.harness, "validation", ts, r)[0],
                 confirm=lambda r: exp.evaluate(cid, c.harness, "confirm", val, r)[0],
                 reserve=lambda r: exp.evaluate(pid, parent.harness, "reserve", val, r)[0],
                 reserve_have=have, on_look=on_look, label=exp.cfg.gate.draw_label(cid, exp.cfg.seed, c.iteration))
    saved = v.trials_max - v.trials_run
    booked = exp.store.rows("SELECT 1 FROM budget_ledger WHERE experiment_id = ? AND candidate_id = ? AND kind = 'saved'",
                            [exp.id, cid])
    if saved > 0 and not booked:
        n = exp.ledger.trials_run()
        per_trial = exp.ledger.spent()["task"] / n if n else 0.0
        stop = v.looks[-1]
        exp.ledger.spend("saved", cid, f"{saved} of up to {v.trials_max} validation trials not run: {stop.stage} look "
                         f"{stop.look} ended it ({stop.outcome})", saved * per_trial, trials=saved)
    if v.outcome == "accept":
        return v, exp.evaluate(cid, c.harness, "confirm", val, v.looks[-1].child_trials)[0]
    return v, _scores(exp, cid, "validation")  # what selection ran, nothing more


def _scores(exp: Experiment, cid: str, split: str) -> Scores:
    out: Scores = {}
    for r in sorted(exp.ledger.trials(cid, split), key=lambda r: (r.task_id, r.attempt)):
        out.setdefault(r.task_id, []).append(r.score)
    return out


def gain_report(exp: Experiment, best: Candidate) -> dict | None:
    """The best candidate's validation gain over its parent, three ways (None for the baseline or a
    candidate the fixed gate accepted)."""
    look = accepted_look(exp, best.candidate_id)
    if look is None or look.estimate is None:
        return None
    e = look.estimate
    return {"selection_gain": e.selection_gain, "confirmation_gain": e.confirmation_gain,
            "adjusted_gain": e.adjusted_gain, "adjusted_ci": [e.low, e.high], "note": e.note}


def preflight(splits: dict[str, list[str]], k: int, gate: SequentialRule = SequentialRule()) -> dict[str, int]:
    """Trial counts an experiment commits to: the baseline, each iteration at most (smoke, screen,
    every look of the staged gate, a new parent reserve), the test."""
    n_val = len(splits["validation"])
    kc, kr = gate.confirm_plan(k)[-1]
    return {"baseline": (len(splits["train"]) + n_val) * k,
            "per_iteration": 1 + len(splits["train"]) * k + (k + kc + kr) * n_val, "test": 2 * len(splits["test"]) * k}
