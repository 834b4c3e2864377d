"""The experiment ledger: experiments, candidates, gate decisions and spend, as store rows.

Everything the optimizer decides is written here before it acts on it, so a reader (or a resumed
run) can explain every step from the store alone.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from task_agent.harness import Harness
from traces.store import Store, now


def _dump(v: Any) -> str:
    return json.dumps(v, default=str, ensure_ascii=False)


class Ledger:
    def __init__(self, store: Store, experiment_id: str):
        self.store, self.id = store, experiment_id

    # -- experiment ------------------------------------------------------------------------
    def create(self, benchmark: str, config: dict[str, Any], splits: dict[str, list[str]]) -> None:
        self.store.con.execute(
            "INSERT INTO experiments VALUES (?, ?, ?, ?, 'running', ?, NULL, NULL)",
            [self.id, benchmark, _dump(config), _dump(splits), now()])

    def experiment(self) -> dict[str, Any] | None:
        rows = self.store.rows("SELECT * FROM experiments WHERE experiment_id = ?", [self.id])
        if not rows:
            return None
        row = rows[0]
        for k in ("config", "splits", "result"):
            row[k] = json.loads(row[k]) if row[k] else None
        return row

    def finish(self, status: str, result: dict[str, Any] | None = None) -> None:
        self.store.con.execute("UPDATE experiments SET status = ?, finished_at = ?, result = ? WHERE experiment_id = ?",
                               [status, now(), _dump(result) if result is not None else None, self.id])

    # -- candidates ------------------------------------------------------------------------
    def add_candidate(self, cid: str, harness: Harness, *, iteration: int, status: str, parent: Harness | None = None,
                      parent_id: str | None = None, proposer: str | None = None, rationale: str | None = None,
                      evidence: list[str] | None = None) -> None:
        self.store.con.execute(
            "INSERT INTO candidates VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
            [cid, self.id, parent_id, iteration, status, proposer, rationale, _dump(evidence or []),
             diff(parent, harness) if parent is not None else None, _dump(harness.model_dump(mode="json")),
             harness.content_hash(), now()])

    def set_status(self, cid: str, status: str, reason: str) -> None:
        self.store.con.execute("UPDATE candidates SET status = ?, status_reason = ? WHERE candidate_id = ?",
                               [status, reason, cid])

    def candidates(self) -> list[dict[str, Any]]:
        rows = self.store.rows("SELECT * FROM candidates WHERE experiment_id = ? ORDER BY iteration", [self.id])
        for r in rows:
            r["harness"] = Harness.model_validate(json.loads(r["harness"]))
        return rows

    # -- decisions and spend ---------------------------------------------------------------
    def decision(self, cid: str, parent_id: str | None, stage: str, outcome: str, reason: str, rule: str,
                 **numbers: Any) -> None:
        details = numbers.pop("details", None)
        self.store.con.execute(
            "INSERT INTO gate_decisions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [self.id, cid, parent_id, stage, outcome, numbers.get("delta"), numbers.get("se"),
             numbers.get("threshold"), numbers.get("n_tasks"), numbers.get("coverage"), reason, rule,
             _dump(details) if details is not None else None, now()])

    def spend(self, kind: str, cid: str | None, ref: str, usd: float | None, tokens_in: int = 0, tokens_out: int = 0) -> None:
        self.store.con.execute("INSERT INTO budget_ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                               [self.id, cid, kind, ref, usd, tokens_in, tokens_out, now()])

    def spent(self) -> dict[str, float]:
        rows = self.store.rows("SELECT kind, coalesce(sum(usd), 0) AS usd FROM budget_ledger WHERE experiment_id = ? "
                               "GROUP BY kind", [self.id])
        out = {"task": 0.0, "meta": 0.0}
        out.update({r["kind"]: float(r["usd"]) for r in rows})
        return out

    def trials_run(self) -> int:
        return self.store.rows("SELECT count(*) AS n FROM trials WHERE experiment_id = ?", [self.id])[0]["n"]


def diff(parent: Harness, child: Harness) -> str:
    """Unified diff of the two harnesses as YAML-like JSON lines (prompts line by line)."""
    def lines(h: Harness) -> list[str]:
        text = json.dumps(h.model_dump(mode="json", exclude_unset=True), indent=1, ensure_ascii=False)
        return text.replace("\\n", "\n").splitlines(keepends=False)

    return "\n".join(difflib.unified_diff(lines(parent), lines(child), "parent", "child", lineterm="", n=2))
