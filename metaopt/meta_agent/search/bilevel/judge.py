"""Fair judgement of a generated mechanism. It changes how the search goes, not a harness, so it is
judged on search progress: validation gain per trial spent, with it and without it, in windows of
the same run. Pure functions over the protocol's candidate records; no I/O.

A window's gain is the validation gain the gate confirmed in it: the sum, over the candidates
accepted in the window, of their gain over their parent as the staged gate estimates it from
fresh confirmation trials (bias-adjusted; meta_agent.staged), so a gain counts only when the
experiment-wise error control let it through, and at its honest size. Its cost is the trials its
candidates spent (screen, selection, confirmation, reserve); its rate is gain / trials. Windows come in pairs (one with the mechanism on, one off, in
an order drawn from the experiment's seed so that drift, e.g. gains getting harder to find as
the run goes on, does not favour either side on average), and each pair gives a paired
difference d = rate(on) - rate(off).
"""

from __future__ import annotations

import hashlib
import math
import random
import statistics
from dataclasses import dataclass
from typing import Any, Literal

from metaopt.meta_agent.gate import t_quantile

LEVEL = 0.90
RULE = ("mechanism judgement: search progress = confirmed validation gain (the staged gate's bias-adjusted "
        "estimates of the candidates it accepted) per trial spent, in windows of {w} iteration(s) with the mechanism on and off, paired (order drawn "
        "from the seed), d = rate(on) - rate(off) per pair, at most {p} pair(s). After each complete pair: with 2 "
        "or more pairs, roll back if the 90% t-interval of mean d lies below 0, keep if it lies above 0. After the "
        "last pair (or when the run ends with at least one complete pair): keep only if mean d > 0 (by point "
        "estimate, said so when the interval covers 0), else roll back. No complete pair: undecided, rolled back.")


@dataclass(frozen=True)
class Verdict:
    outcome: Literal["keep", "roll_back", "undecided", "continue"]
    reason: str
    n_pairs: int
    mean_diff: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


def plan(start: int, window: int, pairs: int, seed: int, mechanism_hash: str) -> dict[str, Any]:
    """The trial's windows from iteration `start`: W iterations each, pairs in an order drawn from
    the experiment's seed and the mechanism's hash (reproducible, different per mechanism)."""
    rng = random.Random(int(hashlib.sha256(f"{seed}:{mechanism_hash}".encode()).hexdigest()[:8], 16))
    order = [ph for _ in range(pairs) for ph in rng.choice([("on", "off"), ("off", "on")])]
    return {"start": start, "window": window, "order": order}


def phase(p: dict[str, Any], iteration: int) -> str | None:
    """"on" / "off" for an iteration inside the trial, None outside it."""
    w = (iteration - p["start"]) // p["window"]
    return p["order"][w] if iteration >= p["start"] and w < len(p["order"]) else None


def end(p: dict[str, Any]) -> int:
    """The first iteration after the trial."""
    return p["start"] + p["window"] * len(p["order"])


def windows(p: dict[str, Any], history: list[dict[str, Any]], now: int) -> list[dict[str, Any]]:
    """The trial's finished windows (every iteration in it decided before iteration `now`)."""
    out = []
    for w, ph in enumerate(p["order"]):
        lo = p["start"] + w * p["window"]
        its = list(range(lo, lo + p["window"]))
        if its[-1] >= now:
            break
        inside = [c for c in history if lo <= c["iteration"] <= its[-1]]
        trials = sum(c["trials"] for c in inside)
        gain = sum(max(0.0, c["val_delta"] or 0.0) for c in inside if c["status"] == "accepted")
        out.append({"phase": ph, "pair": w // 2, "iterations": its, "gain": gain, "trials": trials,
                    "rate": gain / trials if trials else 0.0})
    return out


def judge(wins: list[dict[str, Any]], max_pairs: int, final: bool = False) -> Verdict:
    """Apply RULE to the finished windows; `final`: the run ends now (no more pairs will come)."""
    diffs = []
    for j in range(len(wins) // 2):
        a, b = wins[2 * j], wins[2 * j + 1]
        on, off = (a, b) if a["phase"] == "on" else (b, a)
        diffs.append(on["rate"] - off["rate"])
    n = len(diffs)
    if n == 0:
        if final:
            return Verdict("undecided", "no complete on/off pair of windows before the run ended", 0)
        return Verdict("continue", "waiting for a complete pair of windows", 0)
    mean = statistics.fmean(diffs)
    lo = hi = None
    if n >= 2:
        sd = statistics.stdev(diffs)
        half = t_quantile(LEVEL, n - 1) * sd / math.sqrt(n)
        lo, hi = mean - half, mean + half
    fig = f"mean d = {mean:+.5f} per trial over {n} pair(s)" + (f", 90% CI [{lo:+.5f}, {hi:+.5f}]" if lo is not None else "")
    if lo is not None and hi is not None and hi < 0:
        return Verdict("roll_back", f"slower search with it: {fig}", n, mean, lo, hi)
    if lo is not None and lo > 0:
        return Verdict("keep", f"faster search with it: {fig}", n, mean, lo, hi)
    if n < max_pairs and not final:
        return Verdict("continue", f"not clear yet: {fig}", n, mean, lo, hi)
    note = " (by point estimate; not significant)" if lo is None or hi is None or lo <= 0 <= hi else ""
    if mean > 0:
        return Verdict("keep", f"more gain per trial with it{note}: {fig}", n, mean, lo, hi)
    return Verdict("roll_back", f"no gain per trial from it{note}: {fig}", n, mean, lo, hi)

