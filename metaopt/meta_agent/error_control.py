"""Experiment-wise error control: the alpha each confirmation may spend, the exact test it spends
it on, and an estimate of the accepted gain that accounts for having been selected.

Pure functions and frozen state, no I/O; the one random procedure (a permutation test on
non-binary scores) is seeded by its caller. Scores are per-task trial scores in [0, 1], higher is
better, None = an errored trial (dropped, never counted as 0), as in meta_agent.gate.

Why it holds: an experiment proposes many candidates and only a few reach confirmation. The j-th
confirmation of the experiment (j = 1, 2, ...) is tested at alpha_j = alpha * s * (1 - s)^(j - 1),
a geometric share s of what is left, so sum_j alpha_j <= alpha however many come. Each
confirmation compares *fresh* child trials with a reserve of parent trials that no selection step
ever looked at, so, whatever selected the child, its test rejects a child that is no better than
its parent with probability <= alpha_j; by the union bound an experiment in which no candidate is
really better accepts anything with probability <= alpha (Bonferroni over confirmations, not over
proposals: proposals the selection drops spend nothing).
"""

from __future__ import annotations

import hashlib
import math
import random
from functools import lru_cache
from statistics import NormalDist

from pydantic import BaseModel, ConfigDict, Field

from metaopt.meta_agent.gate import Scores, _scored

_N = NormalDist()


class AlphaSpending(BaseModel):
    """Who got which share of the experiment's alpha. Rebuilt from the gate rows on --resume
    (`from_rows`), so a resumed experiment spends exactly as an uninterrupted one."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Experiment-wise error rate: P(any acceptance | no candidate is really better) <= alpha."""
    spend: float = Field(default=0.7, gt=0.0, le=1.0)
    """Share of the alpha still unspent that each confirmation gets."""
    confirmed: tuple[str, ...] = ()
    """Candidates that began a confirmation, in order: the j-th got level(j)."""

    def level(self, j: int) -> float:
        """alpha_j = alpha * spend * (1 - spend)^(j - 1) for the j-th confirmation (j >= 1)."""
        return self.alpha * self.spend * (1.0 - self.spend) ** (j - 1)

    def index(self, candidate: str) -> int:
        """j for `candidate`: its own if it already began a confirmation, else the next one."""
        return self.confirmed.index(candidate) + 1 if candidate in self.confirmed else len(self.confirmed) + 1

    def begin(self, candidate: str) -> AlphaSpending:
        """The state after `candidate` begins its confirmation (unchanged if it already had)."""
        if candidate in self.confirmed:
            return self
        return self.model_copy(update={"confirmed": (*self.confirmed, candidate)})

    @property
    def spent(self) -> float:
        """Alpha committed so far: a confirmation's whole alpha_j counts once it begins, also when
        it stops for futility (the futility stop is non-binding: it may not hand alpha back)."""
        return sum(self.level(j) for j in range(1, len(self.confirmed) + 1))

    @classmethod
    def from_rows(cls, rows: list[dict], alpha: float = 0.05, spend: float = 0.7) -> AlphaSpending:
        """The state a sequence of gate_decisions rows (dicts with candidate_id, stage and details,
        in the order written) implies: confirmations in order of their first `confirm` row, a
        head-to-head one (details `against`) apart from its candidate's first. Never raises."""
        seen: dict[str, None] = {}
        for r in rows:
            if r.get("stage") == "confirm":
                seen.setdefault(confirmation_key(str(r["candidate_id"]), (r.get("details") or {}).get("against")), None)
        return cls(alpha=alpha, spend=spend, confirmed=tuple(seen))


def confirmation_key(candidate: str, against: str | None = None) -> str:
    """Who a confirmation belongs to in AlphaSpending.confirmed: the candidate, or for a
    head-to-head confirmation (meta_agent.swarm) the candidate against that head."""
    return f"{candidate} vs {against}" if against else candidate


# -- the exact test -----------------------------------------------------------------------------

def _pairs(child: Scores, parent: Scores) -> list[tuple[list[float], list[float]]]:
    out = []
    for t in sorted(set(child) & set(parent)):
        c, p = _scored(child[t]), _scored(parent[t])
        if c and p:
            out.append((c, p))
    return out


@lru_cache(maxsize=4096)
def _hypergeom(total: int, successes: int, drawn: int) -> tuple[int, tuple[float, ...]]:
    """(lowest count, pmf) of the successes among `drawn` of `total` trials holding `successes`."""
    lo, hi = max(0, successes - (total - drawn)), min(drawn, successes)
    norm = math.comb(total, drawn)
    return lo, tuple(math.comb(successes, c) * math.comb(total - successes, drawn - c) / norm
                     for c in range(lo, hi + 1))


def _binary_p(pairs: list[tuple[list[float], list[float]]]) -> float:
    """Exact P(T >= t_obs), T = sum over tasks of the child's mean, given each task's total of
    successes (the stratified hypergeometric test; tasks are independent strata)."""
    lcm = math.lcm(*(len(c) for c, _ in pairs))
    dist, obs = [1.0], 0
    for c, p in pairs:
        w, k = lcm // len(c), round(sum(c))
        obs += w * k
        lo, pmf = _hypergeom(len(c) + len(p), k + round(sum(p)), len(c))
        new = [0.0] * (len(dist) + w * (lo + len(pmf) - 1))
        for i, pi in enumerate(pmf):  # shift-and-add per outcome: list comprehensions, not a double loop
            o = w * (lo + i)
            new[o:o + len(dist)] = [x + pi * d for x, d in zip(new[o:o + len(dist)], dist)]
        dist = new
    return min(1.0, math.fsum(dist[obs:]))


def _permutation_p(pairs: list[tuple[list[float], list[float]]], seed: int, draws: int) -> float:
    """Monte Carlo stratified permutation p-value, (1 + #{T* >= T}) / (1 + draws): exactly valid
    for any number of draws (the observed labelling is one of the equally likely ones)."""
    rng = random.Random(seed)
    pooled = [(c + p, len(c)) for c, p in pairs]
    obs = sum(sum(c) / len(c) for c, _ in pairs)
    hits = 0
    for _ in range(draws):
        t = 0.0
        for values, kc in pooled:
            t += sum(rng.sample(values, kc)) / kc
        hits += t >= obs - 1e-9  # float sums of equal multisets may differ in the last bits
    return (1 + hits) / (1 + draws)


def stratified_p_value(child: Scores, parent: Scores, *, seed: int = 0, draws: int = 20_000) -> tuple[float, str]:
    """One-sided p-value for "the child scores higher than the parent" over the tasks both scored:
    within each task, child and parent trials are exchangeable under the null (the child is no
    better there), and the statistic is the sum over tasks of the child's mean. Binary scores get
    the exact stratified hypergeometric test; others a seeded permutation test with `draws`
    relabellings. Returns (p, method). No common task: (1.0, "no data"). Never raises."""
    pairs = _pairs(child, parent)
    if not pairs:
        return 1.0, "no data"
    if all(s in (0.0, 1.0) for c, p in pairs for s in c + p):
        return _binary_p(pairs), "exact stratified test (binary scores)"
    return _permutation_p(pairs, seed, draws), f"stratified permutation test ({draws} draws, seed {seed})"


def seed_for(*parts: object) -> int:
    """A stable 63-bit seed from any labels (a draw label, a look): same labels, same seed, any run."""
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big") >> 1


# -- the accepted gain, selection taken into account ---------------------------------------------

class GainEstimate(BaseModel):
    """The validation gain of an accepted candidate, three ways."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    selection_gain: float | None
    """Gain seen by the selection stage (child vs the parent's reused validation trials): the
    figure that picked the winner, so optimistic (winner's curse)."""
    confirmation_gain: float
    """Gain on the fresh confirmation trials (child vs the parent's reserve): not selected by the
    validation stage, but conditioned on having passed the confirmation test."""
    adjusted_gain: float
    """Median-unbiased estimate given that the confirmation passed (normal approximation, the
    confirmation's z truncated at its critical value)."""
    low: float
    high: float
    """Conditional 95% interval for the true gain, same approximation."""
    se: float
    note: str


def _log_q(t: float) -> float:
    """log of the upper normal tail; the asymptotic series where erfc would underflow."""
    if t < 30.0:
        return math.log(0.5 * math.erfc(t / math.sqrt(2.0)))
    return -t * t / 2 - math.log(t * math.sqrt(2 * math.pi)) + math.log1p(-1 / (t * t))


def _conditional_upper(x: float, mu: float, c: float) -> float:
    """P(X >= x | X >= c) for X ~ N(mu, 1), x >= c; increasing in mu."""
    return min(1.0, math.exp(_log_q(x - mu) - _log_q(c - mu)))


def _solve(x: float, c: float, target: float) -> float:
    """mu with P(X >= x | X >= c; mu) = target, by bisection (monotone in mu)."""
    lo, hi = x - 50.0, x + 10.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _conditional_upper(x, mid, c) < target else (lo, mid)
    return (lo + hi) / 2


def conditional_estimate(delta: float, se: float, z_crit: float, selection_gain: float | None = None,
                         level: float = 0.95) -> GainEstimate:
    """Bias-aware estimate of a gain `delta` (SE `se`) observed on the confirmation that accepted
    it, where acceptance required roughly delta / se >= z_crit. Treats z = delta / se as N(mu, 1)
    truncated to z >= min(z, z_crit) and returns the median-unbiased mu and the conditional
    interval, back in score units (clipped to [-1, 1]). se <= 0: the figures as observed.
    Never raises."""
    note = ("selection gain is optimistic (it picked the winner); adjusted gain: median-unbiased given "
            "that the fresh confirmation passed (normal approximation)")
    if se <= 0.0 or not math.isfinite(delta):
        return GainEstimate(selection_gain=selection_gain, confirmation_gain=delta, adjusted_gain=delta,
                            low=delta, high=delta, se=max(se, 0.0), note=note + "; SE 0: no adjustment")
    z, c = delta / se, min(delta / se, z_crit)
    tail = (1.0 - level) / 2
    clip = lambda v: max(-1.0, min(1.0, v * se))
    return GainEstimate(selection_gain=selection_gain, confirmation_gain=delta,
                        adjusted_gain=clip(_solve(z, c, 0.5)), low=clip(_solve(z, c, tail)),
                        high=clip(_solve(z, c, 1.0 - tail)), se=se, note=note)


def z_critical(level: float) -> float:
    """The one-sided normal critical value for a test at `level` (0 < level < 1). Computed from
    the lower tail: 1 - level rounds to 1.0 once level < ~1e-16 (the ~23rd confirmation's alpha_j)."""
    return -_N.inv_cdf(level)
