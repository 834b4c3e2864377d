"""The meta-agent's history tools, as text: `history`, `read_candidate`, `compare_train_task`,
and `failure_clusters` (traces.diagnose over the failing train trials it may read).

Built on the typed records of meta_agent.proposers.history, so the same rule holds: train tasks
task by task, validation only as the gate's aggregate numbers (outcome, delta, SE), test never.
`clip` bounds every free text (rationales, diffs, outputs) so small models get short results.
"""

from __future__ import annotations

import json
from typing import Any

from metaopt.core.errors import NoSuchRecord
from metaopt.meta_agent.predictions import passes
from metaopt.meta_agent.proposers.history import CandidateRecord, train_tasks
from metaopt.meta_agent.records import NotebookEntry, train_trials
from metaopt.traces import diagnose
from metaopt.traces.queries import show_trial
from metaopt.traces.store import Store

HELD_OUT = "validation: aggregate only (never per task); test: sealed until the experiment ends"


def _clip(text: str | None, n: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else text[:n] + f" [... {len(text) - n} more characters]"


def _score(trials: list[float | None]) -> str:
    scored = [s for s in trials if s is not None]
    if not trials:
        return "-"
    ok = passes(trials)
    mean = f"{sum(scored) / len(scored):.2f}" if scored else "error"
    return f"{'pass' if ok else 'fail' if ok is False else 'error'} ({mean}, {len(scored)}/{len(trials)} scored)"


def _gate_line(g: Any) -> str:
    nums = ", ".join(f"{k} {v:+.3f}" if k == "delta" else f"{k} {v:.3f}"
                     for k, v in (("delta", g.delta), ("SE", g.se), ("threshold", g.threshold)) if v is not None)
    return f"{g.stage}: {g.outcome}" + (f" ({nums}, {g.n_tasks} tasks)" if nums else "")


def find(records: list[CandidateRecord], ref: Any) -> CandidateRecord:
    """A record by full id or short form (`c3`, `3`)."""
    ref = str(ref).strip()
    for r in records:
        if ref in (r.candidate_id, r.short, r.short.lstrip("c")):
            return r
    raise NoSuchRecord(f"no candidate {ref!r} in this experiment (candidates: {', '.join(r.short for r in records) or 'none'})")


def history_text(records: list[CandidateRecord], clip: int = 300) -> str:
    if not records:
        return "No candidates yet in this experiment."
    out = [f"{len(records)} candidate(s), oldest first ({HELD_OUT}):"]
    for r in records:
        line = f"- {r.short} (parent {r.parent_id.rsplit('/', 1)[-1] if r.parent_id else '-'}, by {r.proposer or '-'}): {r.status}"
        if r.status == "pending":  # another proposal being judged now (--parallel): do not propose it again
            line += " (in flight: being judged now; its diff and claim are final, its outcome is not known yet)"
        if r.status_reason:
            line += f": {_clip(r.status_reason, clip // 2)}"
        out.append(line)
        if r.rationale:
            out.append(f"  rationale: {_clip(r.rationale, clip)}")
        if r.predictions:
            check = f" -> {r.prediction_check.summary}" if r.prediction_check else ""
            out.append(f"  claim: cause {_clip(r.predictions.cause, clip // 2)!r}; fixes {r.predictions.fixes or '[]'};"
                       f" keeps {r.predictions.keeps or '[]'}{check}")
        if r.liveness:
            out.append(f"  liveness ({r.liveness.split}): {_clip(r.liveness.reason, clip // 2)}")
        gates = [g for g in r.gate if g.stage in ("screen", "validation", "verdict")]
        if gates:
            out.append("  gate: " + "; ".join(_gate_line(g) for g in gates))
        fixed, broke = r.flips("fixed"), r.flips("broke")
        if r.train and r.parent_id:
            out.append(f"  train: {len(r.train)} task(s) run; fixed {fixed or '[]'}; broke {broke or '[]'}")
    out.append("read_candidate ID shows one candidate's diff and per-task train results.")
    return "\n".join(out)


def candidate_text(r: CandidateRecord, notes: list[NotebookEntry], clip: int = 4000) -> str:
    out = [f"=== {r.candidate_id} (parent {r.parent_id or '-'}, iteration {r.iteration}, by {r.proposer or '-'}) ===",
           f"status: {r.status}" + (f": {r.status_reason}" if r.status_reason else ""),
           f"rationale: {_clip(r.rationale, clip // 4) or '-'}"]
    if r.predictions:
        out.append(f"claim: cause {r.predictions.cause!r}; fixes {r.predictions.fixes}; keeps {r.predictions.keeps}")
    if r.prediction_check:
        c = r.prediction_check
        out.append(f"check: {c.summary}; hits {c.hits}; misses {c.misses}; broken {c.broken}; "
                   f"unexpected fixes {c.unexpected_fixes}; unexpected breaks {c.unexpected_breaks}")
    if r.liveness:
        out.append(f"liveness ({r.liveness.split}, {r.liveness.trials} trials): {r.liveness.reason}")
        out += [f"  {c.part} {c.what}: {'ran' if c.live else 'did not run' if c.live is False else 'unknown'}"
                f" ({c.evidence})" for c in r.liveness.changes]
    out.append(f"gate ({HELD_OUT}):")
    out += [f"  {_gate_line(g)}: {_clip(g.reason, 300)}" for g in r.gate] or ["  (no gate decision)"]
    if r.train:
        out.append("train tasks (parent -> this candidate):")
        out += [f"  {t.task_id}: {_score(t.parent)} -> {_score(t.child)}" + (f"  [{t.flip}]" if t.flip else "")
                for t in r.train]
    mine = [n for n in notes if r.proposal_trace_id and n.trace_id == r.proposal_trace_id]
    if mine:
        out.append("notes written while proposing it:")
        out += [f"  #{n.seq}: {_clip(n.text, clip // 4)}" for n in mine]
    out.append("diff against the parent:")
    out.append(_clip(r.diff, clip) or "(none: the starting harness)")
    return "\n".join(out)


def compare_text(store: Store, experiment_id: str, records: list[CandidateRecord], task_id: Any,
                 a: Any, b: Any, clip: int = 3000) -> str:
    """One train task under candidates `a` and `b`: each side's trials and a compact transcript."""
    if not isinstance(task_id, str) or task_id not in train_tasks(store, experiment_id):
        raise NoSuchRecord(f"{task_id!r} is not a train task of this experiment: only train tasks can be compared "
                       f"({HELD_OUT})")
    out = [f"=== train task {task_id}: {a} vs {b} ==="]
    for ref in (a, b):
        rec = find(records, ref)
        trials = train_trials(store, experiment_id, rec.candidate_id, task_id)
        out.append(f"--- {rec.short} ({rec.status}) ---")
        if not trials:
            out.append("  (this candidate did not run the task)")
            continue
        out.append("  trials: " + "; ".join(f"{t['trial_id'].rsplit('/', 1)[-1]} {t['status']} score "
                                            f"{'-' if t['score'] is None else format(t['score'], '.2f')}"
                                            for t in trials))
        out.append(transcript_digest(store, trials[0]["trial_id"], clip // 2))
    return "\n".join(out)


def transcript_digest(store: Store, trial_id: str, clip: int) -> str:
    """A trial as one line per step: the model's text, each tool call and the head of its output."""
    t = show_trial(store, trial_id)
    lines, per = [], max(80, clip // 12)
    for e in t["transcript"]:
        if e["type"] == "tool":
            args = e["arguments"]
            shown = args.get("command") if isinstance(args, dict) and "command" in args else json.dumps(args)
            flags = ", ".join(f"{k} {v}" for k, v in e["extra"].items() if k in ("exit_code", "timed_out", "truncated"))
            lines.append(f"  {e['name']}: {_clip(str(shown), per)} -> [{flags}] {_clip(e['result'], per)!r}")
        elif e["type"] == "message" and e["direction"] == "output":
            text = " ".join(p.get("content", "") for p in e["parts"] if p.get("type") == "text").strip()
            if text:
                lines.append(f"  model: {_clip(text, per)}")
    row = t["trial"] or {}
    agent = t["agent"] or {}
    lines.append(f"  episode outcome {agent.get('outcome', '-')}; verifier: {row.get('tests') or '-'}")
    return _clip("\n".join(lines), clip)


def notebook_text(notes: list[NotebookEntry], clip: int = 3000) -> str:
    if not notes:
        return "Your notebook is empty (add_note, or write_revision's note, adds to it)."
    body = "\n".join(f"#{n.seq}: {n.text}" for n in notes)
    if len(body) > clip:  # the newest entries matter most
        body = "[... older entries left out]\n" + body[-clip:]
    return "Your notebook (what you wrote in earlier proposals of this experiment):\n" + body


def clusters_text(store: Store, trial_ids: list[str], clip: int = 300, brief: bool = False) -> str:
    """The failing trials `trial_ids` in clusters by signature (traces.diagnose), largest first: each
    with its size, tasks and example trials / spans; `brief`: one line for the first message."""
    found = diagnose.clusters(store, trial_ids=trial_ids) if trial_ids else []
    if not found:
        return "Failure clusters: none (no failing trial to group)."
    if brief:
        return "Failure clusters (failure_clusters shows them): " + "; ".join(
            f"{c['size']} x {_clip(c['label'], 120)}" for c in found[:5]) + (" ..." if len(found) > 5 else "") + "."
    lines = [f"{len(found)} failure cluster(s) over {len(trial_ids)} failing train trial(s), largest first:"]
    for c in found:
        lines.append(f"- {c['size']} x {_clip(c['label'], clip)} [cluster {c['cluster_id']}]; tasks: "
                     + ", ".join(f"{t} x{n}" for t, n in c["tasks"].items()))
        lines += [f"    e.g. trial {e['trial_id']}" + (f" span {e['span_id']}" if e["span_id"] else "")
                  for e in c["examples"][:3]]
    return "\n".join(lines)
