"""The third line of the harness guard: an audit of an accepted candidate's trials, across traces.

Flags, not verdicts, for a person or the reviewer:
- `value before observation`: an expected value of the task (one that says something on its own,
  guard.similarity) appears in the agent's actions (its tool call arguments, its own text) before
  any observation (the instruction, a tool result) contained it: the agent knew the answer
  without reading it anywhere, which a harness that carries answers produces.
- `concentrated gain`: most of the candidate's gain over its parent comes from one or two tasks
  out of many, the shape a task-keyed hint gives.

    leaked_values(transcript, values) -> [value]             pure: one transcript (queries.show_trial)
    concentrated(parent, child, share, most) -> [task] | []  pure: per-task mean scores
    audit(store, experiment_id, tasks) -> [Flag]              the experiment's accepted candidates

Reads the store through its owners (meta_agent.records, traces.queries); writes nothing; never
raises for a trial it cannot read (that trial is skipped).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from statistics import mean
from typing import TYPE_CHECKING, Any

from metaopt.benchmarks.task import Task
from metaopt.meta_agent.guard_lint import contains_token

if TYPE_CHECKING:
    from metaopt.traces.store import Store

SHARE = 0.8  # of the total gain
MOST = 2  # tasks
MIN_TASKS = 5  # gains over fewer tasks are always concentrated: nothing to say


@dataclass(frozen=True)
class Flag:
    kind: str
    candidate_id: str
    task_id: str | None
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _text(x: Any) -> str:
    return x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, default=str)


def leaked_values(transcript: list[dict[str, Any]], values: set[str]) -> list[str]:
    """The values an action of `transcript` holds before any observation did (case-insensitive,
    as whole tokens). Observations: input messages (the instruction, tool results in the
    conversation) and tool results; actions: output messages and tool call arguments."""
    seen: list[str] = []
    out: list[str] = []
    for e in transcript:
        if e.get("type") == "tool":
            action, observed = _text(e.get("arguments") or ""), _text(e.get("result") or "")
        elif e.get("type") == "message" and e.get("direction") == "output":
            action, observed = _text(e.get("parts") or ""), ""
        else:
            action, observed = "", _text(e.get("parts") or "")
        low = action.lower()
        for v in values:
            if v not in out and contains_token(v, [low]) and not contains_token(v, seen):
                out.append(v)
        if observed:
            seen.append(observed.lower())
    return out


def concentrated(parent: dict[str, float], child: dict[str, float], share: float = SHARE, most: int = MOST) -> list[str]:
    """The tasks that hold `share` or more of the child's total gain when they are `most` or
    fewer out of MIN_TASKS or more tasks both ran; [] otherwise."""
    common = [t for t in child if t in parent]
    gains = {t: child[t] - parent[t] for t in common}
    total = sum(gains.values())
    if len(common) < MIN_TASKS or total <= 0:
        return []
    top = sorted((t for t in gains if gains[t] > 0), key=lambda t: -gains[t])[:most]
    return top if sum(gains[t] for t in top) >= share * total else []


def audit(store: Store, experiment_id: str, tasks: list[Task]) -> list[Flag]:
    """Flags on every accepted candidate of the experiment, over its train trials."""
    from metaopt.meta_agent import records
    from metaopt.meta_agent.guard.similarity import TaskIndex
    from metaopt.traces.queries import show_trial

    values = {t.id: t.values for t in TaskIndex(tasks).tasks}
    cands = records.candidate_rows(store, experiment_id)
    train = (records.experiment_splits(store, experiment_id) or {}).get("train", [])
    flags: list[Flag] = []
    for c in (c for c in cands if c["status"] == "accepted"):
        cid = c["candidate_id"]
        for task in train:
            for tr in records.train_trials(store, experiment_id, cid, task):
                try:
                    transcript = show_trial(store, tr["trial_id"])["transcript"]
                except KeyError:
                    continue
                for v in leaked_values(transcript, values.get(task, set())):
                    flags.append(Flag("value before observation", cid, task,
                                      f"trial {tr['trial_id']}: {v[:60]!r} in an action before any observation"))
        scores = {p: _means(records.train_trial_scores(store, experiment_id, p)) for p in (cid, c["parent_id"]) if p}
        if c["parent_id"]:
            for t in concentrated(scores[c["parent_id"]], scores[cid]):
                flags.append(Flag("concentrated gain", cid, t, f"{t} holds most of the gain over {c['parent_id']}"))
    return flags


def _means(rows: list[dict[str, Any]]) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for r in rows:
        by.setdefault(r["task_id"], []).append(float(r["score"] or 0.0))
    return {t: mean(v) for t, v in by.items()}
