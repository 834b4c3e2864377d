"""The bilevel outer loop, as the inner loop sees it: five calls at fixed places of
meta_agent/optimize.py (begin, select, guidance, filter, on_result) plus finish. Everything it
decides is a row (records.py); everything it keeps between iterations is in the store, so a
resumed experiment goes on where it stopped.

  begin(i)      judge the mechanism on trial when a pair of windows is complete; Level 1.5 every
                N iterations; Level 2 every M (generate.py); record the applied set
  select        the base strategy's pick, Level 1.5's explore_rate, then each applied
                mechanism's select_parent (the first override wins)
  guidance      Level 1.5's text and each applied mechanism's guidance, for the proposer's prompt
  filter        Level 1.5's frozen areas, then each applied mechanism's filter (a reason drops)
  on_result     every live mechanism learns the decision (also the one on trial in its "off"
                windows: it observes but does not act), and its state is saved
"""

from __future__ import annotations

import hashlib
import random
from typing import TYPE_CHECKING, Any

from metaopt.core.errors import HostStartError, SandboxError
from metaopt.meta_agent.ledger import diff
from metaopt.meta_agent.proposers.base import Revision
from metaopt.meta_agent.records import Candidate, CandidateView
from metaopt.meta_agent.search.bilevel import generate, judge, level15
from metaopt.meta_agent.search.bilevel.areas import changes
from metaopt.meta_agent.search.bilevel.host import BuiltinHost, Reply
from metaopt.meta_agent.search.bilevel.live import Live, Registry
from metaopt.meta_agent.search.bilevel.records import Judgement, MechanismRow, SearchParams
from metaopt.meta_agent.search.bilevel.snapshot import Snapshot, context
from metaopt.meta_agent.search.mechanisms import builtin_source, source_hash
from metaopt.meta_agent.search.mechanisms.protocol import AREAS
from metaopt.meta_agent.search.view import SearchView
from metaopt.traces.store import now

if TYPE_CHECKING:
    from metaopt.meta_agent.proposers.base import Proposer


def proposer_info(proposer: Proposer) -> dict[str, Any]:
    return {"name": proposer.name, "takes_guidance": bool(getattr(proposer, "takes_guidance", False)),
            "areas": list(getattr(proposer, "areas", AREAS))}


class BilevelSearch:
    def __init__(self, exp: SearchView, base: Any):
        self.exp, self.base, self.cfg = exp, base, exp.cfg.bilevel
        self.store, self.eid = exp.store, exp.experiment_id
        self.reg = Registry(exp.store, exp.experiment_id, exp.say)
        self.reg.on_off = self._off
        self.iteration = 0
        self.proposer = proposer_info(exp.proposer)
        rows = self.store.select(SearchParams, "experiment_id = ?", [self.eid], order="decided_at DESC")
        self.params = rows[0].params if rows else level15.initial()
        self.model, why = generate.level2_model(exp)
        self.trial: str | None = None
        self.plan: dict[str, Any] | None = None
        self._pending: list[tuple[Live | None, Reply, str]] = []
        self._restore()
        names = ", ".join(m.name for m in self.reg.live.values()) or "none"
        exp.say(f"bilevel: steering {base.name}; mechanisms {names}; Level 1.5 every {self.cfg.level15_every} "
                f"iterations; Level 2 {why}")

    # -- the hooks the loop calls --------------------------------------------------------------
    def begin(self, iteration: int, views: list[CandidateView]) -> None:
        self.iteration = iteration
        self._flush("given to the proposer; no revision came back")
        if self.trial:
            self._judge(final=False)
        if iteration > 1 and (iteration - 1) % self.cfg.level15_every == 0:
            self._level15()
        if self.model is not None and not self.trial and generate.due(self, iteration):
            generate.level2_round(self, views)
        self.reg.sync(iteration, [m.hash for m in self.applied()], self._why_set())

    def select(self, views: list[CandidateView], pick: CandidateView) -> CandidateView:
        it, cid = self.iteration, self.cid()
        kept = [v for v in views if v.status in ("baseline", "accepted")]
        rate = self.params["explore_rate"]
        others = [v for v in kept if v.candidate_id != pick.candidate_id]
        draw = random.Random(f"{self.exp.cfg.seed}:{it}:explore")
        if others and rate > 0 and draw.random() < rate:
            chosen = draw.choice(others)
            self.reg.record(None, "select_parent", Reply("ok", chosen.candidate_id), iteration=it, cid=cid,
                            effect=f"explore_rate {rate:.2f}: picked {chosen.candidate_id} over the strategy's "
                                   f"{pick.candidate_id}")
            pick = chosen
        by_id = {v.candidate_id: v for v in kept}
        parents = self.snap().parents(pick.candidate_id)
        offered = [p["id"] for p in parents]
        chosen_by = None
        for m in self._with("select_parent"):
            r = m.host.call("select_parent", parents, {"seed": _seed(self.exp.cfg.seed, it, m.hash)},
                            timeout=self.cfg.call_timeout_s, offered=offered)
            effect = None
            if r.ok and r.value and r.value != pick.candidate_id and r.value in by_id:
                if chosen_by is None:
                    effect, chosen_by = f"picked {r.value} over {pick.candidate_id}", m.name
                    pick = by_id[r.value]
                else:
                    effect = f"wanted {r.value}; {chosen_by} had already chosen"
            elif r.ok:
                effect = "no override" if r.value is None else "agreed with the pick"
            self.reg.record(m, "select_parent", r, iteration=it, cid=cid, effect=effect)
        return pick

    def guidance(self, parent: CandidateView) -> str | None:
        it, cid = self.iteration, self.cid()
        ctx = self.ctx(self.snap())
        if self.params.get("guidance"):
            self._pending.append((None, Reply("ok", self.params["guidance"]), self.params["guidance"]))
        for m in self._with("guidance"):
            r = m.host.call("guidance", ctx, timeout=self.cfg.call_timeout_s)
            if r.ok and r.value:
                self._pending.append((m, r, r.value))
            else:
                self.reg.record(m, "guidance", r, iteration=it, cid=cid, effect="no guidance" if r.ok else None)
        if not self.proposer["takes_guidance"]:
            self._flush(f"not shown: the {self.proposer['name']} proposer takes no text")
            return None
        text = "\n".join(f"- ({m.name if m else 'level-1.5'}) {t}" for m, _, t in self._pending)
        return text or None

    def filter(self, revision: Revision, parent: Candidate | CandidateView, cid: str) -> str | None:
        self._flush(None)
        it = self.iteration
        areas, kinds = changes(parent.harness, revision.harness)
        rev = {"parent_id": parent.candidate_id, "rationale": revision.rationale, "areas": areas, "kinds": kinds,
               "diff": diff(parent.harness, revision.harness)[:4000]}
        ctx = self.ctx(self.snap())
        frozen = [a for a in areas if a in ctx["search"]["freeze"]]
        reason = None
        if frozen:
            reason = f"level-1.5: {', '.join(frozen)} frozen (repeatedly rejected)"
            self.reg.record(None, "filter", Reply("ok", reason), iteration=it, cid=cid, effect=f"dropped {cid}: {reason}")
        for m in self._with("filter"):
            r = m.host.call("filter", rev, ctx, timeout=self.cfg.call_timeout_s)
            effect = None
            if r.ok and isinstance(r.value, str):
                effect = f"dropped {cid}: {r.value}" if reason is None else f"would drop {cid} too: {r.value}"
                reason = reason or (r.value if r.value.startswith(m.name) else f"{m.name}: {r.value}")
            elif r.ok:
                effect = "kept"
            self.reg.record(m, "filter", r, iteration=it, cid=cid, effect=effect)
        return reason

    def on_result(self, c: Candidate) -> None:
        snap = self.snap()
        cand, dec, ctx = snap.candidate(c.candidate_id), snap.decision(c.candidate_id), self.ctx(snap)
        applied = {m.hash for m in self.applied(c.iteration)}
        for m in list(self.reg.live.values()):
            r = m.host.call("on_result", cand, dec, ctx, timeout=self.cfg.call_timeout_s)
            self.reg.record(m, "on_result", r, iteration=c.iteration, cid=c.candidate_id,
                            effect=("recorded" if m.hash in applied else "recorded (off window: observing, not acting)")
                            if r.ok else None)
            if r.ok:
                s = m.host.call("state_dict", timeout=self.cfg.call_timeout_s)
                self.reg.record(m, "state_dict", s, iteration=c.iteration, cid=c.candidate_id,
                                state=s.value if s.ok else None)

    def active(self) -> list[str]:
        return [m.hash for m in self.applied()]

    def finish(self) -> dict[str, Any]:
        self._flush("given to the proposer; no revision came back")
        if self.trial:
            self._judge(final=True)
        self.close()
        rows = self.reg.rows()
        return {"mechanisms": [{"name": r.name, "hash": r.mechanism_hash[:12], "origin": r.origin, "status": r.status,
                                "reason": r.status_reason} for r in rows],
                "level2_sessions": generate.sessions(self), "search_params": self.params}

    def close(self) -> None:
        self.reg.close()
        generate.end_host_run(self)

    # -- helpers ----------------------------------------------------------------------------
    def cid(self) -> str:
        return f"{self.eid}/c{self.iteration}"

    def snap(self) -> Snapshot:
        return Snapshot.read(self.store, self.eid)

    def ctx(self, snap: Snapshot) -> dict[str, Any]:
        return context(snap, iteration=self.iteration, max_iterations=self.exp.cfg.max_iterations,
                       proposer=self.proposer, search=level15.public(self.params, self.iteration))

    def applied(self, iteration: int | None = None) -> list[Live]:
        it = self.iteration if iteration is None else iteration
        off = self.trial and self.plan and judge.phase(self.plan, it) == "off"
        return [m for m in self.reg.live.values() if not (off and m.hash == self.trial)]

    def _with(self, hook: str) -> list[Live]:
        return [m for m in self.applied() if hook in m.hooks]

    def _flush(self, effect: str | None) -> None:
        """Write the pending guidance rows; effect None: check the proposal transcript for each text."""
        pending, self._pending = self._pending, []
        seen = "\n".join(m.text for m in (getattr(self.exp.proposer, "last_run", None) or {}).get("messages", [])
                         if getattr(m, "role", None) == "user")
        for m, r, text in pending:
            e = effect or (f"in {self.cid()}'s proposal prompt (found in its transcript)" if text in seen
                           else "given to the proposer; not found in its transcript")
            self.reg.record(m, "guidance", r, iteration=self.iteration, cid=self.cid(), effect=e)

    def _level15(self) -> None:
        params, why = level15.adjust(self.params, self.snap().history, self.iteration, self.cfg.level15_every,
                                     self.proposer["areas"], self.cfg.max_explore_rate)
        self.store.insert(SearchParams(experiment_id=self.eid, iteration=self.iteration, params=params, reason=why,
                                       decided_at=now()))
        self.params = params
        self.exp.say(f"  level 1.5: {why}")

    def _judge(self, final: bool) -> None:
        h, plan = self.trial, self.plan
        if h is None or plan is None:
            raise RuntimeError("judging with no mechanism on trial")
        wins = judge.windows(plan, self.snap().history, self.iteration + (1 if final else 0))
        v = judge.judge(wins, self.cfg.judge_pairs, final=final)
        if v.outcome == "continue":
            return
        self.trial = self.plan = None
        self.store.insert(Judgement(
            experiment_id=self.eid, mechanism_hash=h, iteration=self.iteration, outcome=v.outcome,
            rule=judge.RULE.format(w=self.cfg.window, p=self.cfg.judge_pairs), reason=v.reason, windows=wins,
            n_pairs=v.n_pairs, mean_diff=v.mean_diff, ci_low=v.ci_low, ci_high=v.ci_high, judged_at=now()))
        m = self.reg.live.get(h)
        if v.outcome == "keep":
            self.reg.set_status(h, "kept", v.reason)
            self.exp.say(f"  mechanism {m.name if m else h[:12]} kept: {v.reason}")
        elif m is not None:
            self.reg.switch_off(m, f"judged {v.outcome.replace('_', ' ')}: {v.reason}", self.iteration,
                                status="rolled_back")

    def _off(self, m: Live, reason: str) -> None:
        """A mechanism on trial that is switched off is judged at once: rolled back."""
        if m.hash == self.trial:
            self.trial = self.plan = None
            self.store.insert(Judgement(
                experiment_id=self.eid, mechanism_hash=m.hash, iteration=self.iteration, outcome="roll_back",
                rule=judge.RULE.format(w=self.cfg.window, p=self.cfg.judge_pairs),
                reason=f"switched off before its judgement: {reason}", judged_at=now()))

    def _why_set(self) -> str:
        if self.trial and self.plan:
            ph = judge.phase(self.plan, self.iteration)
            w = (self.iteration - self.plan["start"]) // self.plan["window"] + 1
            name = self.reg.live[self.trial].name if self.trial in self.reg.live else self.trial[:12]
            return f"{name} on trial: window {w} of {len(self.plan['order'])}, {ph}"
        return "active set"

    def _restore(self) -> None:
        for name in self.cfg.builtins:
            src = builtin_source(name)
            self.reg.add(MechanismRow(experiment_id=self.eid, mechanism_hash=source_hash(src), name=name,
                                      origin="builtin", source=src, status="builtin", created_at=now(),
                                      updated_at=now()))
        last = self.reg.active_set()
        rows = {r.mechanism_hash: r for r in self.reg.rows()}
        hashes = list(last.hashes) if last else [r.mechanism_hash for r in rows.values() if r.origin == "builtin"]
        for r in rows.values():
            if r.status == "on_trial":
                self.trial, self.plan = r.mechanism_hash, r.trial
                hashes += [] if r.mechanism_hash in hashes else [r.mechanism_hash]
            elif r.status == "kept" and r.mechanism_hash not in hashes:
                hashes.append(r.mechanism_hash)
        for h in hashes:
            r = rows[h]
            try:
                host = BuiltinHost(r.name) if r.origin == "builtin" else generate.make_host(self, r.source)
            except (HostStartError, SandboxError, OSError) as e:
                self.reg.set_status(h, "off", f"did not restart: {e}")
                continue
            m = Live(h, r.name, r.origin, host, list(host.info["hooks"]))
            self.reg.live[h] = m
            state = self.reg.last_state(h)
            if state is not None:
                self.reg.record(m, "load_state_dict", host.call("load_state_dict", state), iteration=self.iteration,
                                cid=None, effect="state restored on resume")
        if last is None:
            names = ", ".join(m.name for m in self.reg.live.values()) or "none"
            self.reg.sync(0, list(self.reg.live), f"the built-in mechanisms: {names}")


def _seed(seed: int, iteration: int, h: str) -> int:
    return int(hashlib.sha256(f"{seed}:{iteration}:{h}".encode()).hexdigest()[:8], 16)
