"""The staged gate with N candidates in flight (issue 27 item 3), simulated through the real gate
functions: gate.screen, NoiseFloor.measure, sequential.validate and confirm_look, AlphaSpending.
Prints ONE JSON object (or, with --markdown, the RESULTS table).

    python -m perf.gate_swarm                            # 400 experiments per world and N (minutes)
    python -m perf.gate_swarm --experiments 60 --in-flight 1,4
    python -m perf.gate_swarm --concurrency-rule per_worker   # a wrong rule: the null bound fails
    python -m perf.gate_simulation --in-flight 1,2,4,8   # the same, from the gate simulation

The concurrency rule simulated (the one fixed for `metaopt run --parallel N`):
- alpha_j by begin order: the j-th confirmation to *begin* (its confirm stage dispatched, before
  any of its fresh trials ran) is tested at alpha_j = alpha s (1 - s)^(j - 1), whatever order the
  confirmations finish in; a level is fixed before its data exist, so the union bound holds.
- a child is judged against the parent it was proposed from; if, when its confirmation passes,
  the head is no longer that parent, it gets a head-to-head confirmation against the current head
  (fresh trials of both, its own alpha_j taken at its begin) and becomes head only if that passes
  (against the head of that moment: if the head moved again meanwhile, another head-to-head).

An experiment: binary validation and train tasks as in perf.gate_simulation (a flaky share at
p = 0.5, the rest solved or failed for good), the baseline's K trials on both; N workers, each
with one candidate in flight: it proposes from the head of that moment (about one time unit, as a
model call), screens on the train tasks the parent failed, selects and confirms on the validation
tasks (each round of trials, one per task, about 0.1 unit, jittered; selection is timed as its K
rounds even when it stops early), then proposes again. Events run in time order, so confirmations
begin and finish interleaved; the head a proposal starts from is the head when it starts. Worlds: `null`, no candidate is better than
its parent (every acceptance is false); `power`, each proposal is truly better than its parent
with probability 0.15, by +10 or +20 points (placed on tasks its parent does not always pass).

Wrong rules, to show the null bound is not vacuous: `finish` (a confirmation's j counts only the
confirmations finished when it begins, so two in flight share a j), `per_worker` (each worker
spends its own alpha), `no_h2h` (a child whose parent was superseded is accepted on its win over
its parent: the head can move to something no better than the head before it).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field

from metaopt.meta_agent.error_control import AlphaSpending, seed_for
from metaopt.meta_agent.gate import NoiseFloor, Scores, screen
from metaopt.meta_agent.sequential import SequentialRule, confirm_look, validate

RULES = ("begin", "finish", "per_worker", "no_h2h")
ROUND = 0.1  # time units one round of trials (one per task) takes; a proposal takes ~1
BETTER = 0.15  # the power world: probability that a proposal is truly better than its parent


@dataclass
class World:
    flaky: float = 0.3
    n: int = 20
    k: int = 3
    proposals: int = 30
    better: float = 0.0
    """Probability that a proposal is truly better than its parent (the null world: 0)."""


@dataclass
class Node:
    """A candidate (or the baseline): its true success rate per task, and its trials."""

    cid: str
    parent: str
    val_truth: list[float]
    tr_truth: list[float]
    slot: int = -1
    train: Scores = field(default_factory=dict)
    val: Scores = field(default_factory=dict)
    """As a parent: the validation record its children's selection compares with."""
    reserve: Scores = field(default_factory=dict)
    """As a parent: reserve trials no selection looked at, grown as far as a confirmation needs."""
    accepted: Scores | None = None
    """The trials of the confirmation that last passed (its validation record if it becomes head)."""


def _trials(rng: random.Random, truth: list[float], prefix: str, k: int) -> Scores:
    return {f"{prefix}{i:02d}": [float(rng.random() < p) for _ in range(k)] for i, p in enumerate(truth)}


def _grow(rng: random.Random, scores: Scores, truth: list[float], prefix: str, r: int) -> Scores:
    """`scores` grown in place to r trials per task; returns the first r of each."""
    for i, p in enumerate(truth):
        got = scores.setdefault(f"{prefix}{i:02d}", [])
        got += [float(rng.random() < p) for _ in range(r - len(got))]
    return {t: v[:r] for t, v in scores.items()}


def _improve(rng: random.Random, truth: list[float], gain: float) -> list[float]:
    """gain x len(truth) of success mass on random tasks the parent does not always pass."""
    out, mass = list(truth), gain * len(truth)
    open_ = [i for i, p in enumerate(out) if p < 1.0]
    rng.shuffle(open_)
    for i in open_:
        step = min(1.0 - out[i], mass)
        out[i], mass = out[i] + step, mass - step
        if mass <= 1e-12:
            break
    return out


def _base(world: World) -> tuple[list[float], list[float]]:
    def rates(n: int) -> list[float]:
        nf = round(world.flaky * n)
        n0 = (n - nf) // 2
        return [0.5] * nf + [0.0] * n0 + [1.0] * (n - nf - n0)
    return rates(world.n), rates(2 * world.n)


def _mean(xs: list[float]) -> float:
    return math.fsum(xs) / len(xs)


class Experiment:
    """One simulated experiment with `flight` candidates in flight under concurrency rule `rule`."""

    def __init__(self, world: World, flight: int, rule: str, srule: SequentialRule, seed: int, label: str):
        self.w, self.flight, self.rule, self.srule, self.label = world, flight, rule, srule, label
        self.rng = random.Random(seed)
        self.tasks = [f"v{i:02d}" for i in range(world.n)]
        vt, tt = _base(world)
        self.rng.shuffle(vt)
        base = Node("c0", "", vt, tt)
        base.val, base.train = _trials(self.rng, vt, "v", world.k), _trials(self.rng, tt, "r", world.k)
        self.noise = NoiseFloor.measure(base.val)
        self.nodes, self.head, self.count = {"c0": base}, "c0", 0
        self.spending = AlphaSpending(alpha=srule.alpha, spend=srule.spend)
        self.per_slot = [self.spending] * flight
        self.finished: list[str] = []
        self.events: list[tuple[float, int, str, str]] = []
        self.seq = 0
        self.moves: list[dict] = []
        self.levels: list[float] = []
        self.superseded = self.h2h = self.better = 0

    # -- alpha: the one place the rules differ on it --------------------------------------------
    def _spending_at_begin(self, slot: int) -> AlphaSpending:
        if self.rule == "finish":
            return AlphaSpending(alpha=self.srule.alpha, spend=self.srule.spend, confirmed=tuple(self.finished))
        return self.per_slot[slot] if self.rule == "per_worker" else self.spending

    def _spent(self, slot: int, after: AlphaSpending, label: str) -> None:
        self.levels.append(after.level(after.index(label)))
        if self.rule == "per_worker":
            self.per_slot[slot] = after
        elif self.rule != "finish":
            self.spending = after

    # -- the event loop -------------------------------------------------------------------------
    def _at(self, t: float, kind: str, cid: str) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, cid))

    def _jitter(self) -> float:
        return self.rng.uniform(0.5, 1.5)

    def _propose(self, t: float, slot: int) -> None:
        if self.count >= self.w.proposals:
            return
        self.count += 1
        parent = self.nodes[self.head]
        vt, tt = parent.val_truth, parent.tr_truth
        if self.rng.random() < self.w.better:
            g = self.rng.choice((0.10, 0.20))
            vt, tt = _improve(self.rng, vt, g), _improve(self.rng, tt, g)
        node = Node(f"c{self.count}", parent.cid, vt, tt, slot)
        self.better += _mean(vt) > _mean(parent.val_truth) + 1e-12
        self.nodes[node.cid] = node
        self._at(t + self._jitter(), "screen", node.cid)

    def run(self) -> dict:
        for s in range(self.flight):
            self._propose(0.0, s)
        now = 0.0
        while self.events:
            now, _, kind, cid = heapq.heappop(self.events)
            node = self.nodes[cid]
            if kind == "screen":
                self._screen(now, node)
            elif kind == "begin":
                self._confirm(now, node)
            elif kind == "end":
                self._end(now, node)
            elif kind.startswith("h2h"):
                self._h2h_end(now, node, kind)
            else:  # "done": the worker is free
                self._propose(now, node.slot)
        final = self.nodes[self.head]
        return {"moves": self.moves, "gain": _mean(final.val_truth) - _mean(self.nodes["c0"].val_truth),
                "levels": self.levels, "h2h": self.h2h, "superseded": self.superseded, "time": now,
                "better": self.better}

    def _screen(self, now: float, node: Node) -> None:
        parent = self.nodes[node.parent]
        node.train = _trials(self.rng, node.tr_truth, "r", self.w.k)
        failing = [t for t, v in parent.train.items() if sum(v) < len(v)]
        now += 0.3 * self._jitter()
        if screen(parent.train, node.train, failing).outcome != "pass":
            return self._at(now, "done", node.cid)
        node.val = _trials(self.rng, node.val_truth, "v", self.w.k)  # all K rounds; selection takes a prefix
        self._at(now + ROUND * self.w.k * self._jitter(), "begin", node.cid)  # selection: up to K rounds

    def _confirm(self, now: float, node: Node) -> None:
        """Selection has ended: validate runs on, and the confirmation begins now (its j is taken
        from the spending of this moment) if selection passed."""
        parent = self.nodes[node.parent]
        conf: Scores = {}
        v = validate(node.cid, self.tasks, parent.val, self.noise, self.w.k, self.srule,
                     self._spending_at_begin(node.slot), child=lambda ts, r: {t: node.val[t][:r] for t in ts},
                     confirm=lambda r: _grow(self.rng, conf, node.val_truth, "v", r),
                     reserve=lambda r: _grow(self.rng, parent.reserve, parent.val_truth, "v", r),
                     label=f"{self.label}:{node.cid}")
        if not any(lk.stage == "confirm" for lk in v.looks):
            return self._at(now, "done", node.cid)
        self._spent(node.slot, v.spending, node.cid)
        last = [lk for lk in v.looks if lk.stage == "confirm"][-1]
        node.accepted = {t: s[:last.child_trials] for t, s in conf.items()} if v.outcome == "accept" else None
        self._at(now + ROUND * (last.child_trials + last.parent_trials) * self._jitter(), "end", node.cid)

    def _end(self, now: float, node: Node) -> None:
        self.finished.append(node.cid)
        if node.accepted is None:
            return self._at(now, "done", node.cid)
        if self.head == node.parent or self.rule == "no_h2h":
            self._move(node, node.accepted)
            return self._at(now, "done", node.cid)
        self._head_to_head(now, node)

    def _head_to_head(self, now: float, node: Node) -> None:
        """A fresh confirmation of the child against the current head, its alpha_j taken now."""
        self.h2h += 1
        head, label = self.nodes[self.head], f"{node.cid}>{self.head}#{self.h2h}"
        after = self._spending_at_begin(node.slot).begin(label)
        j = after.index(label)
        self._spent(node.slot, after, label)
        mine: Scores = {}
        theirs: Scores = {}
        plan = self.srule.confirm_plan(self.w.k)
        for i, (kc, kr) in enumerate(plan, 1):
            c = _grow(self.rng, mine, node.val_truth, "v", kc)
            p = _grow(self.rng, theirs, head.val_truth, "v", kr)
            look = confirm_look(p, c, self.noise, self.tasks, i, len(plan), j, after.level(j), after.spent, self.srule,
                                seed_for(self.label, label, i))
            if look.outcome != "continue":
                break
        node.accepted = c if look.outcome == "accept" else None
        self._at(now + ROUND * (kc + kr) * self._jitter(), f"h2h {head.cid}", node.cid)

    def _h2h_end(self, now: float, node: Node, kind: str) -> None:
        self.finished.append(f"{node.cid}>{kind}")
        if node.accepted is None:
            self.superseded += 1  # reject: superseded, not better than the head
            return self._at(now, "done", node.cid)
        if self.head == kind.split()[1]:
            self._move(node, node.accepted)
            return self._at(now, "done", node.cid)
        self._head_to_head(now, node)  # the head moved again while it ran: against the new one

    def _move(self, node: Node, val: Scores) -> None:
        old = self.nodes[self.head]
        self.moves.append({"cid": node.cid, "better": _mean(node.val_truth) > _mean(old.val_truth) + 1e-12})
        node.val, node.reserve, self.head = val, {}, node.cid


# -- the report ---------------------------------------------------------------------------------

def _rate(xs: list[float]) -> list[float]:
    """[mean, Monte Carlo SE] over experiments."""
    m = _mean(xs)
    se = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) if len(xs) > 1 else 0.0
    return [round(m, 4), round(se, 4)]


def cell(world: World, flight: int, rule: str, srule: SequentialRule, experiments: int, seed: int, name: str) -> dict:
    """One world at one N under one rule: the per-experiment figures, [mean, SE]."""
    runs = [Experiment(world, flight, rule, srule, seed_for(seed, name, e), f"{name}{e}").run()
            for e in range(experiments)]
    out = {
        "any_acceptance": _rate([float(bool(r["moves"])) for r in runs]),
        "head_moved_to_no_better": _rate([float(any(not m["better"] for m in r["moves"])) for r in runs]),
        "accepted_truly_better": _rate([float(any(m["better"] for m in r["moves"])) for r in runs]),
        "truly_better_proposed": _rate([float(r["better"]) for r in runs]),
        "moves_to_better": _rate([float(sum(m["better"] for m in r["moves"])) for r in runs]),
        "true_gain_of_final_head": _rate([r["gain"] for r in runs]),
        "confirmations_begun": _rate([float(len(r["levels"])) for r in runs]),
        "alpha_committed": _rate([math.fsum(r["levels"]) for r in runs]),
        "alpha_committed_max": round(max(math.fsum(r["levels"]) for r in runs), 4),
        "head_to_head": _rate([float(r["h2h"]) for r in runs]),
        "superseded_rejected": _rate([float(r["superseded"]) for r in runs]),
        "time_units": _rate([r["time"] for r in runs]),
    }
    return out


def run(flights: list[int], rules: list[str], experiments: int, seed: int, world: World,
        srule: SequentialRule = SequentialRule(), better: float = BETTER, worlds: tuple[str, ...] = ("null", "power")
        ) -> dict:
    """Per rule, per N, per world (null, power): the figures of `cell`."""
    t0 = time.monotonic()
    made = {"null": world, "power": World(world.flaky, world.n, world.k, world.proposals, better)}
    res = {rule: {str(n): {name: cell(made[name], n, rule, srule, experiments, seed, name) for name in worlds}
                  for n in flights} for rule in rules}
    return {"results": res, "wall_s": round(time.monotonic() - t0, 1)}


def markdown(report: dict) -> str:
    f = lambda r: f"{r[0]:.3f} +- {r[1]:.3f}"
    head = ("| rule | N in flight | null: experiment-wise false acceptance | null: confirmations begun | null: alpha "
            "committed, mean / most | power: head moves to a better head | power: head moved to no better | power: "
            "true gain of the final head | power: head-to-heads / superseded rejects | power: time units |")
    rows = [head, "|---" * 10 + "|"]
    for rule, by_n in report["results"].items():
        for n, c in by_n.items():
            nu, po = c["null"], c.get("power")
            row = (f"| {rule} | {n} | {f(nu['any_acceptance'])} | {nu['confirmations_begun'][0]:.2f} | "
                   f"{nu['alpha_committed'][0]:.4f} / {nu['alpha_committed_max']:.4f} |")
            if po:
                row += (f" {po['moves_to_better'][0]:.2f} of {po['truly_better_proposed'][0]:.2f} proposed | "
                        f"{f(po['head_moved_to_no_better'])} | {f(po['true_gain_of_final_head'])} | "
                        f"{po['head_to_head'][0]:.2f} / {po['superseded_rejected'][0]:.2f} | {po['time_units'][0]:.1f} |")
            rows.append(row + (" - |" * 5 if not po else ""))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m perf.gate_swarm", description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiments", type=int, default=400, help="simulated experiments per world, N and rule")
    ap.add_argument("--in-flight", default="1,2,4,8", help="comma-separated N")
    ap.add_argument("--concurrency-rule", default="begin", help=f"comma-separated, of {', '.join(RULES)}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flaky", type=float, default=0.3)
    ap.add_argument("--n", type=int, default=20, help="validation tasks (train: 2n)")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--proposals", type=int, default=30, help="proposals per experiment")
    ap.add_argument("--rule", default="{}", help="staged-gate settings to try, as JSON")
    ap.add_argument("--null-only", action="store_true", help="skip the power world")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    rules = a.concurrency_rule.split(",")
    if unknown := set(rules) - set(RULES):
        ap.error(f"unknown concurrency rule {sorted(unknown)}; known: {', '.join(RULES)}")
    srule = SequentialRule.model_validate({**SequentialRule().model_dump(), **json.loads(a.rule)})
    out = run([int(x) for x in a.in_flight.split(",")], rules, a.experiments, a.seed,
              World(a.flaky, a.n, a.k, a.proposals), srule,
              worlds=("null",) if a.null_only else ("null", "power"))
    report = {"benchmark": "gate_swarm", "command": " ".join(["python -m perf.gate_swarm", *(sys.argv[1:] if argv is None else argv)]),
              "world": vars(World(a.flaky, a.n, a.k, a.proposals)) | {"power_world_better": BETTER},
              "staged_gate": srule.model_dump(mode="json"), **out}
    print(markdown(report) if a.markdown else json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
