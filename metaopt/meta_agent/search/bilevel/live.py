"""The experiment's mechanisms while it runs: their rows, their live hosts, every hook call as a
row (what it returned, what it did), and the active set over time. A mechanism whose hook raises,
times out, returns garbage or whose host dies is switched off for the rest of the run: its host
is closed and a new active-set row points back at the hashes that were active without it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metaopt.meta_agent.search.bilevel import records
from metaopt.meta_agent.search.bilevel.host import Reply
from metaopt.meta_agent.search.bilevel.records import ActiveSet, HookCall, MechanismRow
from metaopt.traces.store import Store, now

LEVEL15 = "level-1.5"  # the pseudo-mechanism Level 1.5's own effects are recorded under


@dataclass
class Live:
    hash: str
    name: str
    origin: str
    host: Any
    hooks: list[str]


class Registry:
    def __init__(self, store: Store, experiment_id: str, say: Callable[[str], None]):
        self.store, self.eid, self.say = store, experiment_id, say
        self.live: dict[str, Live] = {}
        self.applied_now: list[str] = []
        self.on_off: Callable[[Live, str], None] = lambda m, reason: None

    # -- rows ------------------------------------------------------------------------------
    def row(self, h: str) -> MechanismRow | None:
        found = self.store.select(MechanismRow, "experiment_id = ? AND mechanism_hash = ?", [self.eid, h])
        return found[0] if found else None

    def rows(self) -> list[MechanismRow]:
        return self.store.select(MechanismRow, "experiment_id = ?", [self.eid], order="created_at")

    def add(self, row: MechanismRow) -> None:
        if self.row(row.mechanism_hash) is None:
            self.store.insert(row)

    def set_status(self, h: str, status: str, reason: str | None, trial: dict[str, Any] | None = None) -> None:
        records.set_mechanism_status(self.store, self.eid, h, status, reason, trial)

    # -- calls -----------------------------------------------------------------------------
    def record(self, m: Live | None, hook: str, reply: Reply | None, *, iteration: int, cid: str | None,
               effect: str | None = None, state: dict[str, Any] | None = None) -> None:
        """One hook-call row (m None: Level 1.5's own effect). A failed reply switches m off."""
        if reply is not None and reply.status == "ok":
            output = None if hook == "state_dict" else json.dumps(reply.value)
        elif reply is not None:
            output = json.dumps(repr(reply.value)[:2000]) if reply.value is not None else None
        else:
            output = None
        self.store.insert(HookCall(
            experiment_id=self.eid, iteration=iteration, candidate_id=cid, mechanism_hash=m.hash if m else LEVEL15,
            mechanism=m.name if m else LEVEL15, hook=hook, status=reply.status if reply else "ok", output=output,
            error=reply.error if reply else None, effect=effect, state=state, ms=reply.ms if reply else 0.0,
            called_at=now()))
        if m is not None and reply is not None and not reply.ok:
            self.switch_off(m, f"{hook}() {reply.status} at iteration {iteration}: {reply.error}", iteration)

    def last_state(self, h: str) -> dict[str, Any] | None:
        return records.last_state(self.store, self.eid, h)

    # -- life and death --------------------------------------------------------------------
    def switch_off(self, m: Live, reason: str, iteration: int, status: str = "off") -> None:
        if m.hash not in self.live:
            return
        del self.live[m.hash]
        m.host.close()
        self.set_status(m.hash, status, reason)
        self.on_off(m, reason)
        self.say(f"  mechanism {m.name} ({m.hash[:12]}) {'switched off' if status == 'off' else status}: {reason}")
        self.sync(iteration, self.applied_now, f"{m.name} {status.replace('_', ' ')}: {reason}", gone=m.hash)

    def active_set(self) -> ActiveSet | None:
        rows = self.store.select(ActiveSet, "experiment_id = ?", [self.eid], order="changed_at DESC")
        return rows[0] if rows else None

    def sync(self, iteration: int, hashes: list[str], reason: str, gone: str | None = None) -> None:
        """Record the applied set when it changed. `gone`: a mechanism just switched off or rolled
        back: always a row, saying which set from before that mechanism existed it returns to."""
        hashes = [h for h in hashes if h in self.live]
        self.applied_now = hashes
        last = self.active_set()
        if last is not None and last.hashes == hashes and gone is None:
            return
        row = self.row(gone) if gone else None
        if row is not None:
            back = records.set_active_at(self.store, self.eid, hashes, row.created_at)
            reason += (f"; back to the set of iteration {back}" if back is not None
                       else "; a set not active before it")
        self.store.insert(ActiveSet(experiment_id=self.eid, iteration=iteration, hashes=hashes, reason=reason,
                                    changed_at=now()))

    def close(self) -> None:
        for m in list(self.live.values()):
            m.host.close()
