"""The gate on simulated experiments: today's fixed gate (screen + decide) against the staged gate
(screen + meta_agent.sequential), on the same seeds. Prints ONE JSON object.

    python -m perf.gate_simulation                    # 2,000 experiments per condition (minutes)
    python -m perf.gate_simulation --experiments 300  # a quick look
    python -m perf.gate_simulation --markdown         # the README table instead of JSON
    python -m perf.gate_simulation --in-flight 1,2,4,8 --experiments 400   # N candidates in flight (perf.gate_swarm)

The loop is simulated as the optimizer runs it. Each experiment: binary tasks, a flaky share of
them at p = 0.5, the rest solved or failed for good (half each); 2n train and n validation tasks;
the baseline runs K trials on both (its validation trials give the noise floor). Then a greedy
chain: each child is screened on the train tasks its parent failed (K trials), then validated;
an accepted child becomes the parent with its train trials and its validation record, and the
same validation tasks serve every iteration. A no-op child has its parent's true success rates; a
child with a true gain g gets g * n of success mass on the fewest tasks that can take it (failed
tasks go to 1.0; in the all-flaky world flaky tasks go from 0.5 to 1.0), placed at random.
Scenarios per condition: 30 no-op proposals (false acceptance, cost), one gain as the first
proposal (power), a +10 gain after 10 no-ops (what spending costs later), a +20 gain then 29
no-ops (false acceptance after a real gain).

Vectorised over experiments with NumPy: today's gate and the staged gate's selection are
re-implemented array-wise, the confirmation's exact test by convolution. `crosscheck` replays the
first experiments of every scenario through the real functions (gate.screen, gate.decide,
sequential.validate) on the same trials and counts the decisions that agree.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from functools import cache

import numpy as np

from metaopt.meta_agent.error_control import AlphaSpending, conditional_estimate, z_critical
from metaopt.meta_agent.gate import ASSUMED_TASK_VARIANCE, GateRule, NoiseFloor, decide, screen
from metaopt.meta_agent.sequential import SequentialRule, rule_text, selection_order, validate
from metaopt.meta_agent.task_order import interleave, selection_plan
from perf.gate_report import markdown, summarize, targets

RULE, FIXED = SequentialRule(), GateRule()
CONDITIONS = [(f, k, n) for f in (0.3, 1.0) for k in (1, 3) for n in (10, 20)]
GAINS = (0.05, 0.10, 0.20)
REPLAYED = 5  # experiments per scenario replayed through the real functions


def world(flaky: float, n: int, gain: float) -> tuple[np.ndarray, np.ndarray]:
    """(parent, child) true success rate per task, unshuffled."""
    nf = round(flaky * n)
    n0 = (n - nf) // 2
    p = np.array([0.5] * nf + [0.0] * n0 + [1.0] * (n - nf - n0))
    c, mass = p.copy(), gain * n
    for i in range(n):
        if mass > 1e-12 and (flaky >= 1 or p[i] == 0.0):
            step = min(1.0 - c[i], mass)
            c[i], mass = c[i] + step, mass - step
    return p, c


def select_order(candidate: str, pmean: np.ndarray) -> np.ndarray:
    """sequential.selection_order of the validation tasks v00.. (the crosscheck's names), as indices,
    per experiment (rows of pmean, the parent's mean per task): the candidate's seeded draw, with
    the tasks each experiment's parent always passed interleaved in proportion."""
    drawn = [int(t[1:]) for t in selection_order(candidate, [f"v{i:02d}" for i in range(pmean.shape[1])], RULE)]
    if not (RULE.shuffle_tasks and RULE.stratify):
        return np.tile(drawn, (len(pmean), 1))
    passed = (pmean >= 1.0)[:, drawn]
    return np.array([interleave(drawn, row) for row in passed.tolist()])


def bern(rng: np.random.Generator, p: np.ndarray, k: int) -> np.ndarray:
    return (rng.random((*p.shape, k)) < p[..., None]).astype(np.int16)


def fsum_rows(x: np.ndarray) -> np.ndarray:
    """Row sums as math.fsum gives them (the gates sum with fsum: exact ties must tie here too)."""
    return np.array([math.fsum(r) for r in x.tolist()])


def screen_vec(p_tr: np.ndarray, c_tr: np.ndarray) -> np.ndarray:
    """gate.screen over the tasks the parent failed, per experiment."""
    kp, kc = p_tr.shape[2], c_tr.shape[2]
    ps, cs, out = p_tr.sum(2), c_tr.sum(2), np.zeros(len(p_tr), bool)
    fail = ps < kp
    for i in np.nonzero(fail.any(1))[0]:
        pm, cm = [x / kp for x in ps[i][fail[i]].tolist()], [x / kc for x in cs[i][fail[i]].tolist()]
        worse = sum(c < p for p, c in zip(pm, cm))
        out[i] = math.fsum(cm) / len(cm) > math.fsum(pm) / len(pm) and worse <= len(pm) / 2
    return out


def decide_vec(p_val: np.ndarray, c_val: np.ndarray, pooled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """gate.decide's accept (coverage is full here) and delta, per experiment."""
    n, kp, kc = p_val.shape[1], p_val.shape[2], c_val.shape[2]
    d = c_val.sum(2) / kc - p_val.sum(2) / kp
    delta = fsum_rows(d) / n
    se = np.maximum(np.sqrt(d.var(1, ddof=1) / n), np.sqrt(pooled * (1 / kp + 1 / kc) / n))
    return (delta >= FIXED.min_effect) & (delta > FIXED.z * se), delta


@cache
def _pmf(total: int, succ: int, drawn: int) -> np.ndarray:
    lo, hi = max(0, succ - (total - drawn)), min(drawn, succ)
    pm = np.zeros(hi + 1)
    pm[lo:] = [math.comb(succ, c) * math.comb(total - succ, drawn - c) / math.comb(total, drawn)
               for c in range(lo, hi + 1)]
    return pm


def exact_p(c: np.ndarray, r: np.ndarray, kc: int, kr: int) -> float:
    """error_control's exact stratified test, equal trial counts, by convolution."""
    dist = np.ones(1)
    for ci, ri in zip(c.tolist(), r.tolist()):
        dist = np.convolve(dist, _pmf(kc + kr, ci + ri, kc))
    return float(min(1.0, dist[int(c.sum()):].sum()))


class Scenario:
    """R experiments of one scenario. Both gates see the same baselines and the same child draws
    (uniforms shared); the staged gate's confirmation and reserve trials come from their own stream."""

    def __init__(self, flaky: float, k: int, n: int, reps: int, seed: int, gain: float, gain_at: int, proposals: int):
        self.n, self.k, self.reps, self.gain_at, self.proposals = n, k, reps, gain_at, proposals
        seeds = np.random.default_rng([seed, round(flaky * 10), k, n, round(gain * 100), gain_at + 1]).integers(2 ** 62, size=3)
        base, child, self.conf_rng = (np.random.default_rng(s) for s in seeds)
        pv, gv = world(flaky, n, gain)
        pt, gt = world(flaky, 2 * n, gain)
        perm = np.argsort(base.random((reps, n)), axis=1)
        self.p_val, self.g_val, self.p_tr, self.g_tr = pv[perm], gv[perm], np.tile(pt, (reps, 1)), np.tile(gt, (reps, 1))
        self.base_tr, self.base_val = bern(base, self.p_tr, k), bern(base, self.p_val, k)
        self.measured = k >= 2
        self.pooled = (self.base_val.var(axis=2, ddof=1).mean(axis=1) if self.measured
                       else np.full(reps, ASSUMED_TASK_VARIANCE))
        self.uniforms = [(child.random((reps, 2 * n, k)), child.random((reps, n, k))) for _ in range(proposals)]
        self.replay: dict[str, dict] = {"fixed": {}, "staged": {}}

    def child_trials(self, t: int, truth_val: np.ndarray, truth_tr: np.ndarray):
        cv, ct = (self.g_val, self.g_tr) if t == self.gain_at else (truth_val, truth_tr)
        u_tr, u_val = self.uniforms[t]
        return cv, ct, (u_tr < ct[..., None]).astype(np.int16), (u_val < cv[..., None]).astype(np.int16)

    def run_fixed(self) -> dict:
        par_tr, par_val = self.base_tr.copy(), self.base_val.copy()
        truth_val, truth_tr = self.p_val.copy(), self.p_tr.copy()
        acc, trials, reported = np.zeros((self.proposals, self.reps), bool), [], []
        for t in range(self.proposals):
            _, _, c_tr, c_val = self.child_trials(t, truth_val, truth_tr)
            scr = screen_vec(par_tr, c_tr)
            ok, delta = decide_vec(par_val, c_val, self.pooled)
            a = scr & ok
            trials += [self.n * self.k] * int(scr.sum())
            if t == self.gain_at:
                reported += delta[a].tolist()
                truth_val[a], truth_tr[a] = self.g_val[a], self.g_tr[a]
            par_tr[a], par_val[a] = c_tr[a], c_val[a]
            acc[t] = a
            for e in range(min(REPLAYED, self.reps)):
                self.replay["fixed"].setdefault(e, []).append((bool(a[e]), self.n * self.k if scr[e] else 0))
        return {"accepted": acc, "trials": trials, "reported": reported}

    def run_staged(self) -> dict:
        R, n, k = self.reps, self.n, self.k
        plan, cplan = selection_plan(list(range(n)), k, RULE.select_looks, RULE.min_share), RULE.confirm_plan(k)
        kc_max, kr_max = cplan[-1]
        par_tr, par_sum, par_k = self.base_tr.copy(), self.base_val.sum(2).astype(float), np.full(R, float(k))
        truth_val, truth_tr = self.p_val.copy(), self.p_tr.copy()
        reserve, have = bern(self.conf_rng, truth_val, kr_max), np.zeros(R, int)
        spending = [AlphaSpending(alpha=RULE.alpha, spend=RULE.spend) for _ in range(R)]
        acc, trials, estimates = np.zeros((self.proposals, R), bool), [], []
        for e in range(min(REPLAYED, R)):
            self.replay["staged"][e] = {"reserves": [reserve[e].copy()], "conf": [], "decisions": []}
        for t in range(self.proposals):
            cv, _, c_tr, c_val = self.child_trials(t, truth_val, truth_tr)
            conf = bern(self.conf_rng, cv, kc_max)
            scr = screen_vec(par_tr, c_tr)
            active, passed, used, sel_delta = scr.copy(), np.zeros(R, bool), np.zeros(R, int), np.zeros(R)
            pmean = par_sum / par_k[:, None]
            order = select_order(f"c{t}", pmean)
            for li, (subset, r) in enumerate(plan):
                m = len(subset)
                idx = order[:, :m]
                d = np.take_along_axis(c_val[:, :, :r].sum(2), idx, 1) / r - np.take_along_axis(pmean, idx, 1)
                delta = fsum_rows(d) / m
                se = np.sqrt(self.pooled * (m * (1 / par_k + 1 / r))) / m  # as sequential._se rounds it
                if not self.measured:
                    se = np.maximum(se, np.sqrt(d.var(1, ddof=1) / m))
                z = np.where(se > 0, delta / np.where(se > 0, se, 1), np.where(delta > 0, np.inf, 0.0))
                used[active], sel_delta[active] = (r - 1) * n + m, delta[active]
                big = delta >= RULE.min_effect
                if li < len(plan) - 1:
                    early = active & big & (z >= RULE.early_z) & (m == n)
                    passed |= early
                    active &= ~early & ~(z < RULE.futility_z * math.sqrt(((r - 1) * n + m) / (k * n)))
                else:
                    passed |= active & big & (z >= RULE.select_z)
            a, extra = np.zeros(R, bool), np.zeros(R, int)
            for i in np.nonzero(passed)[0]:
                spending[i] = spending[i].begin(f"c{t}")
                alpha_j = spending[i].level(len(spending[i].confirmed))
                for li, (kc, kr) in enumerate(cplan, 1):
                    cs, rs = conf[i, :, :kc].sum(1), reserve[i, :, :kr].sum(1)
                    extra[i] = kc * n + max(0, kr - have[i]) * n
                    p, level = exact_p(cs, rs, kc, kr), RULE.look_level(alpha_j, li, len(cplan))
                    cdelta = math.fsum((cs / kc - rs / kr).tolist()) / n
                    if p <= level and cdelta > 0:
                        a[i] = True
                        if t == self.gain_at:  # sequential.confirm_look's SE: within-task variance of these trials
                            within = (cs * (kc - cs) / kc).sum() + (rs * (kr - rs) / kr).sum()
                            dof = n * (kc - 1) + n * (kr - 1)
                            var = within / dof if dof else self.pooled[i]
                            se = math.sqrt(var * n * (1 / kc + 1 / kr)) / n
                            est = conditional_estimate(cdelta, se, z_critical(level), selection_gain=sel_delta[i])
                            estimates.append((sel_delta[i], est))
                            if i < REPLAYED:
                                self.replay["staged"][i].setdefault("estimates", {})[t] = est
                        par_sum[i], par_k[i] = cs, kc
                        break
                    if li == len(cplan) or p > RULE.futility_p:
                        break
                have[i] = max(have[i], kr)
            trials += (used + extra)[scr].tolist()
            if a.any():
                if t == self.gain_at:
                    truth_val[a], truth_tr[a] = self.g_val[a], self.g_tr[a]
                par_tr[a] = c_tr[a]
                reserve[a], have[a] = bern(self.conf_rng, truth_val[a], kr_max), 0
            acc[t] = a
            for e in range(min(REPLAYED, R)):
                rp = self.replay["staged"][e]
                rp["conf"].append(conf[e].copy())
                rp["decisions"].append((bool(a[e]), int(used[e] + extra[e]) if scr[e] else 0))
                if a[e]:
                    rp["reserves"].append(reserve[e].copy())
        return {"accepted": acc, "trials": trials, "estimates": estimates,
                "confirmations": np.array([len(s.confirmed) for s in spending]),
                "spent": np.array([s.spent for s in spending])}

    def crosscheck(self) -> dict[str, list[int]]:
        """Replay the first experiments through the real functions: [decisions, agreeing] per gate,
        and [accepted gains, equal estimates] for the staged gate's bias-aware estimate."""
        n, k = self.n, self.k
        val, tr = [f"v{i:02d}" for i in range(n)], [f"r{i:02d}" for i in range(2 * n)]

        def sc(arr, names, r=None):
            return {t: [float(x) for x in row[:r]] for t, row in zip(names, arr.tolist())}

        out = {"fixed": [0, 0], "staged": [0, 0], "estimates": [0, 0]}
        for e, rows in self.replay["fixed"].items():
            p_tr, p_val = sc(self.base_tr[e], tr), sc(self.base_val[e], val)
            noise, tv, tt = NoiseFloor.measure(p_val), self.p_val[e:e + 1], self.p_tr[e:e + 1]
            for t, (accepted, _) in enumerate(rows):
                c_tr, c_val = (x[e] for x in self.child_trials(t, tv, tt)[2:])
                failing = [x for x in tr if sum(p_tr[x]) < len(p_tr[x])]
                ok = (screen(p_tr, sc(c_tr, tr), failing).outcome == "pass"
                      and decide(p_val, sc(c_val, val), noise, FIXED).outcome == "accept")
                out["fixed"][0] += 1
                out["fixed"][1] += ok == accepted
                if ok:
                    p_tr, p_val = sc(c_tr, tr), sc(c_val, val)
                    if t == self.gain_at:
                        tv, tt = self.g_val[e:e + 1], self.g_tr[e:e + 1]
        for e, rp in self.replay["staged"].items():
            p_tr, p_val = sc(self.base_tr[e], tr), sc(self.base_val[e], val)
            noise, tv, tt = NoiseFloor.measure(p_val), self.p_val[e:e + 1], self.p_tr[e:e + 1]
            spending, res_i, have = AlphaSpending(alpha=RULE.alpha, spend=RULE.spend), 0, 0
            for t, (accepted, trials) in enumerate(rp["decisions"]):
                c_tr, c_val = (x[e] for x in self.child_trials(t, tv, tt)[2:])
                failing = [x for x in tr if sum(p_tr[x]) < len(p_tr[x])]
                out["staged"][0] += 1
                if screen(p_tr, sc(c_tr, tr), failing).outcome != "pass":
                    out["staged"][1] += not accepted and trials == 0
                    continue
                conf, res = rp["conf"][t], rp["reserves"][res_i]
                v = validate(f"c{t}", val, p_val, noise, k, RULE, spending,
                             child=lambda ts, r, c_val=c_val: {x: sc(c_val, val, r)[x] for x in ts},
                             confirm=lambda r, conf=conf: sc(conf, val, r), reserve=lambda r, res=res: sc(res, val, r),
                             reserve_have=have)
                spending = v.spending
                out["staged"][1] += (v.outcome == "accept") == accepted and v.trials_run == trials
                confirms = [lk for lk in v.looks if lk.stage == "confirm"]
                if confirms:
                    have = max(have, confirms[-1].parent_trials)
                if v.outcome == "accept" and t in rp.get("estimates", {}):
                    mine, real = rp["estimates"][t], v.estimate
                    out["estimates"][0] += 1
                    out["estimates"][1] += all(abs(getattr(mine, f) - getattr(real, f)) < 1e-9 for f in
                                               ("selection_gain", "confirmation_gain", "adjusted_gain", "low", "high"))
                if v.outcome == "accept":
                    p_tr, p_val = sc(c_tr, tr), sc(conf, val, confirms[-1].child_trials)
                    res_i, have = res_i + 1, 0
                    if t == self.gain_at:
                        tv, tt = self.g_val[e:e + 1], self.g_tr[e:e + 1]
        return out


def run(reps: int, seed: int) -> dict:
    t0 = time.monotonic()
    conditions, agree = [], {"fixed": [0, 0], "staged": [0, 0], "estimates": [0, 0]}
    for flaky, k, n in CONDITIONS:
        scen = {"null": Scenario(flaky, k, n, reps, seed, 0.0, -1, 30),
                **{g: Scenario(flaky, k, n, reps, seed, g, 0, 1) for g in GAINS},
                "later": Scenario(flaky, k, n, reps, seed, 0.10, 10, 11),
                "strong": Scenario(flaky, k, n, reps, seed, 0.20, 0, 30)}
        res = {}
        for gate in ("fixed", "staged"):
            got = {name: (s.run_fixed() if gate == "fixed" else s.run_staged()) for name, s in scen.items()}
            res[gate] = summarize(got["null"], {g: got[g] for g in GAINS}, got["later"], got["strong"], n, k,
                                  gate == "staged")
        for s in scen.values():
            for gate, (total, ok) in s.crosscheck().items():
                agree[gate][0] += total
                agree[gate][1] += ok
        conditions.append({"flaky_share": flaky, "k": k, "n_validation": n, "n_train": 2 * n, "fixed": res["fixed"],
                           "staged": res["staged"]})
    return {"conditions": conditions, "crosscheck": agree, "wall_s": round(time.monotonic() - t0, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m perf.gate_simulation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiments", type=int, default=2000, help="simulated experiments per scenario and condition")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", action="store_true", help="print the README table instead of the JSON")
    ap.add_argument("--rule", default="{}", help='staged-gate settings to try, as JSON (e.g. \'{"select_z": 1.0}\')')
    ap.add_argument("--in-flight", help="N candidates in flight, comma-separated (e.g. 1,2,4,8): run the staged gate "
                    "under concurrency instead (perf.gate_swarm, with these --experiments, --seed, --rule, --markdown)")
    a = ap.parse_args(argv)
    if a.in_flight:
        from perf import gate_swarm
        return gate_swarm.main(["--in-flight", a.in_flight, "--experiments", str(a.experiments), "--seed", str(a.seed),
                                "--rule", a.rule, *(["--markdown"] if a.markdown else [])])
    global RULE
    RULE = SequentialRule.model_validate({**RULE.model_dump(), **json.loads(a.rule)})
    out = run(a.experiments, a.seed)
    report = {
        "benchmark": "gate_simulation",
        "command": f"python -m perf.gate_simulation --experiments {a.experiments} --seed {a.seed}"
                   + (f" --rule '{a.rule}'" if a.rule != "{}" else ""),
        "experiments_per_scenario": a.experiments, "proposals_per_null_experiment": 30,
        "legend": ("rates are [mean, Monte Carlo SE] over experiments; per-proposal rates are averaged per experiment "
                   "first; trials per decision count validation trials of candidates that passed the screen (fixed: "
                   "K x n; staged: selection + confirmation + new parent-reserve trials)"),
        "fixed_gate": "meta_agent.gate screen + decide, " + FIXED.model_dump_json(),
        "staged_gate": {"settings": RULE.model_dump(mode="json"), "rule": rule_text(RULE, 3)},
        "targets": targets(out["conditions"]), **out,
    }
    print(markdown(report) if a.markdown else json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
