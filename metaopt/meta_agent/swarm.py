"""The decision loop: up to cfg.parallel candidates in flight, proposals overlapping evaluations;
`--parallel 1` (the default) is the same loop with one slot, run in the caller's thread.

    main thread   stop? (iterations, budget, trials count what was dispatched) -> pick the parent
                  (Steps.pick: the head, or the strategy's choice) -> hand the candidate to a slot;
                  as slots end: the plateau count, the head
    slot          ask -> register (ledger: the candidate, `pending`) -> judge (guard, then
                  meta_agent.judge through the Evaluator) -> passed, but the head moved meanwhile?
                  head-to-head against the head -> apply (ledger)

Each step is a public method of meta_agent.steps.Steps, written once; this module only schedules
them.

Error control (the rule every confirmation follows, whatever the interleaving): the j-th
confirmation to *begin* gets alpha_j = alpha s (1 - s)^(j-1). With several slots its j is written
at its begin (a `confirm` row with outcome `begin`, Ledger.begin_confirmation), before any of its
fresh trials run: a level fixed before its data exist, so by the union bound the experiment-wise
false acceptance stays <= alpha. With one slot confirmations begin in the order candidates are
decided, so no begin row is needed (nor written). A child is judged against the parent it was
proposed from; if, when it passes, the head is no longer that parent, it is not accepted but
confirmed head to head against the head (judge.head_to_head, a new confirmation with its own
alpha_j); otherwise rejected, "superseded". So the head only ever moves to a candidate shown
better than the head before it.

Shared memory: a candidate is in the store (status `pending`, its diff, rationale and claim) before
it is judged, and every decision as soon as it is written, so each proposal reads the others in
flight and every finished outcome (meta_agent.proposers.history; the notebook is the same store).
The Ledger writes decisions one at a time (its lock); each thread reads and writes the store
through its own cursor (traces.store). Ctrl-C / SIGTERM interrupt every candidate's trials as they
interrupt one (Evaluator.abort); --resume judges the pending candidates again (their trials are
not run again, their confirmations keep their j).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any, TypeVar

from metaopt.meta_agent.gate import NoiseFloor, mean
from metaopt.meta_agent.judge import Judgement
from metaopt.meta_agent.proposers import Revision
from metaopt.meta_agent.records import Candidate
from metaopt.meta_agent.steps import Picked, Steps

T = TypeVar("T")


def at_once(exp: Steps, *jobs: Callable[[], T]) -> list[T]:
    """The results of independent evaluations `jobs` (the baseline's train and validation, the
    sealed test of baseline and best), up to cfg.parallel of them running at once; one after
    another at --parallel 1. Interrupted, every job's trials end as on Ctrl-C."""
    if exp.cfg.parallel < 2 or len(jobs) < 2:
        return [job() for job in jobs]
    pool = ThreadPoolExecutor(max_workers=min(exp.cfg.parallel, len(jobs)), thread_name_prefix="evaluation")
    try:
        out = [f.result() for f in [pool.submit(job) for job in jobs]]
    except BaseException:
        exp.interrupt()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return out


def run_loop(exp: Steps, cands: list[Candidate], noise: NoiseFloor, rng: random.Random,
             tried: set[str]) -> tuple[list[Candidate], str, str]:
    """Run `exp` on with up to cfg.parallel candidates in flight until a stop; returns the
    candidates (in iteration order), why it stopped and the head's id. Pending candidates (a
    resumed experiment) are judged first, in flight like the rest."""
    return _Loop(exp, cands, noise, tried).run(rng)


class _InThisThread:
    """One slot: each candidate runs to its end in the caller's thread, as submitted."""

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        f: Future[T] = Future()
        try:
            f.set_result(fn(*args))
        except Exception as e:  # noqa: BLE001 - handed back as a slot's would be; Ctrl-C propagates at once
            f.set_exception(e)
        return f

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        return None


class _Loop:
    def __init__(self, exp: Steps, cands: list[Candidate], noise: NoiseFloor, tried: set[str]):
        self.exp, self.ledger, self.noise, self.tried = exp, exp.ledger, noise, tried
        self.by_id = {c.candidate_id: c for c in cands}
        kept = [c for c in cands if c.status in ("baseline", "accepted")]  # an experiment stored before verdict rows
        self.head = exp.ledger.head() or kept[-1].candidate_id
        self.several = exp.cfg.parallel > 1
        self.slots: set[int] = set()  # Evidence.slot of the proposals running now
        self.unnumbered = 0  # proposals dispatched that have no candidate (number) yet

    def run(self, rng: random.Random) -> tuple[list[Candidate], str, str]:
        exp, n = self.exp, self.exp.cfg.parallel
        self.next = max(c.iteration for c in self.by_id.values()) + 1  # the next candidate's number
        since_gain, stop, news = 0, None, True  # news: something was decided since a proposer had nothing
        decided = [c for c in self.by_id.values() if c.status not in ("baseline", "pending")]
        for c in sorted(decided, key=lambda c: c.iteration):
            since_gain = 0 if c.status == "accepted" else since_gain + 1
        todo = sorted((c for c in self.by_id.values() if c.status == "pending"), key=lambda c: c.iteration)
        pool: Any = ThreadPoolExecutor(max_workers=n, thread_name_prefix="candidate") if self.several else _InThisThread()
        flying: set[Future] = set()
        try:
            while True:
                while len(flying) < n and (todo or (news and not stop)):
                    if todo:  # resumed: finish what was in flight first
                        flying.add(pool.submit(self._decide, todo.pop(0)))
                        continue
                    with self.ledger.lock:  # the numbers the proposals in flight will take count as dispatched
                        dispatched = self.next + self.unnumbered
                    if stop := exp.stop_reason(dispatched, since_gain, mean(exp.val(self.by_id[self.head]))):
                        break
                    picked = exp.pick(dispatched, self._in_order(), self.head, rng, self.tried)
                    with self.ledger.lock:
                        self.unnumbered += 1
                    flying.add(pool.submit(self._candidate, picked))
                if not flying:
                    break
                done, _ = wait(flying, return_when=FIRST_COMPLETED)
                for f in done:
                    flying.discard(f)
                    out = f.result()
                    if isinstance(out, str):  # nothing to propose (or a failure): again once news came,
                        news = False          # and stop if no other candidate is in flight to bring any
                        stop = stop or (out if not flying else None)
                    else:
                        news = True
                        since_gain = 0 if out is not None and out.status == "accepted" else since_gain + 1
        except BaseException:
            exp.interrupt()  # every candidate's trials end as on Ctrl-C
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return self._in_order(), stop or "", self.head

    def _in_order(self) -> list[Candidate]:
        return sorted(self.by_id.values(), key=lambda c: c.iteration)

    # -- a slot --------------------------------------------------------------------------------
    def _candidate(self, picked: Picked) -> Candidate | str | None:
        """Propose (unless a merge), record the candidate as pending, judge it. A proposal that
        another one in flight made first is asked again (twice at most)."""
        try:
            c, drop = self._proposed(picked)
        finally:
            with self.ledger.lock:
                self.unnumbered -= 1
        return self._decide(c, drop) if isinstance(c, Candidate) else c

    def _proposed(self, picked: Picked) -> tuple[Candidate | str | None, str | None]:
        """The candidate recorded (pending) and what the search filter said of it; or why not."""
        exp = self.exp
        for _ in range(3):
            if isinstance(picked, tuple):
                rev, parent, by = picked
            else:
                parent, by = picked, exp.proposer.name
                with self.ledger.lock:
                    slot = min(set(range(len(self.slots) + 1)) - self.slots)
                    self.slots.add(slot)
                try:
                    got = exp.ask(parent, self.tried, slot)  # the live set: what the others proposed meanwhile
                finally:
                    self.slots.discard(slot)
                if not isinstance(got, Revision):
                    return got, None
                rev = got
            with self.ledger.lock:
                if exp.interrupted():  # interrupted while it was proposing: nothing is written
                    return None, None
                if self.several and rev.harness.content_hash() in self.tried:  # one slot: nothing else in flight
                    exp.say("  the same revision is already in flight: proposing again")
                    continue
                iteration, self.next = self.next, self.next + 1
                c, drop = exp.register(rev, parent, by, iteration, self.tried)
                self.by_id[c.candidate_id] = c
                return c, drop
        return None, None

    def _decide(self, c: Candidate, drop: str | None = None) -> Candidate:
        """Judge `c` against its parent; head to head against the head when that moved meanwhile;
        the ledger records each judgement. Returns `c` as decided."""
        exp = self.exp
        parent = self.by_id[c.parent_id or ""]
        j = exp.judge(c, parent, self.noise, drop, (lambda key: exp.begin(c)) if self.several else None)
        first, against = j, parent.candidate_id
        while True:
            with self.ledger.lock:
                head = self.head
                if j.decision != "accepted" or head == against or not self.several:  # one slot: its parent, as picked
                    return self._close(c, replace(j, scores=first.scores))
                why = f"{j.reason}; superseded: the head moved to {head} while it was in flight: head to head next"
                exp.record(replace(j, decision="pending", reason=why,
                                   steps=(*j.steps[:-1], replace(j.steps[-1], reason=why))), self._tag(c))
            j = exp.head_to_head(c, self.by_id[head], self.noise)
            j = replace(j, check=first.check, liveness=first.liveness)
            against = head

    def _close(self, c: Candidate, j: Judgement) -> Candidate:
        """Record the final judgement (under the ledger's lock) and move the head if it accepted."""
        c = self.exp.apply(c, j, self._tag(c))
        if c.status == "accepted":
            self.head = c.candidate_id
        self.by_id[c.candidate_id] = c
        return c

    def _tag(self, c: Candidate) -> str:
        """What a slot's lines start with: which candidate, when several are in flight."""
        return c.candidate_id.rsplit("/", 1)[-1] if self.several else ""
