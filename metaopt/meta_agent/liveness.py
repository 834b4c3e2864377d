"""Liveness: evidence from a candidate's own spans that the parts its revision changed ran.

    changes(parent, child) -> [Change]                  what differs, and what would prove it ran
    measure(store, parent, child, trial_ids, parent_trial_ids, split) -> Liveness

A gain (or a loss) from an edit whose changed parts never ran is noise by construction, so the
optimizer records a candidate whose changes never ran as `inconclusive`, whatever the gate said.
What counts as "ran", per changed part:

  tool added or changed      the tool was called (execute_tool span); a change to timeout_s or
                             output_limit alone counts only when the limit mattered: a call ran
                             longer than the old timeout / timed out at the new one, or its
                             output was longer than the smaller of the two limits
  tool removed               the parent called it on the same split (else removing it changed nothing)
  a role's system prompt     its sha256 (`metaopt.system.sha256`) is on a chat span; a role's
  (prompts.system, roles,    tool list or turn limit: that role ran (its prompt hash seen)
  routing.roles.*)
  prompts.task_template      a first user message starts and ends as the template does
  routing.verification       a finish call was answered with the verification prompt
  routing.limits.max_turns   raised: an episode made more model calls than the old limit;
                             lowered: an episode ended at the turn limit
  routing.limits.max_wall_s  raised: an episode ran longer than the old limit; lowered: one hit it
  model section              a chat span ran (the settings apply to every call)
  routing.context            not checkable from spans (recorded as unknown, never held against it)

The candidate is live when any change ran, dead when every change is checkable and none ran (or
nothing that runs changed: only name / description), unknown otherwise, and unknown when its
trials left no spans at all (tracing off): absence of spans is not evidence that nothing ran.
"""

from __future__ import annotations

import json
from typing import Any

from metaopt.meta_agent.outcomes import Change, Liveness
from metaopt.task_agent.harness import Harness, ToolDef
from metaopt.traces.instrument import prompt_sha256
from metaopt.traces.queries import TrialSpans
from metaopt.traces.store import Store

__all__ = ["Change", "Liveness", "changes", "measure"]  # the records live in meta_agent.outcomes

LIMIT_FIELDS = {"timeout_s", "output_limit"}


def changes(parent: Harness, child: Harness) -> list[Change]:
    """The changed parts of `child` against `parent`, liveness not yet measured."""
    out: list[Change] = []
    ptools, ctools = {t.name: t for t in parent.tools}, {t.name: t for t in child.tools}
    for name, t in ctools.items():
        if name not in ptools:
            out.append(Change(part=f"tools.{name}", what="added", proof=f"tool {name} was called"))
        elif (fields := _diff_fields(ptools[name], t)):
            out.append(Change(part=f"tools.{name}", what="changed: " + ", ".join(fields),
                              proof=(f"tool {name}'s limit mattered" if set(fields) <= LIMIT_FIELDS
                                     else f"tool {name} was called")))
    out += [Change(part=f"tools.{n}", what="removed", proof=f"the parent called {n}") for n in ptools if n not in ctools]
    for role in child.routing.roles:
        same_prompt = role in parent.routing.roles and parent.system_prompt(role) == child.system_prompt(role)
        same_role = role in parent.routing.roles and parent.routing.roles[role] == child.routing.roles[role]
        if not (same_prompt and same_role):  # a tool added to every role is the tool's change, not the role's
            what = "prompt changed" if not same_prompt else "role settings changed"
            out.append(Change(part=f"role {role}", what=what,
                              proof=f"a chat span carried role {role}'s system prompt sha256 "
                                    f"{prompt_sha256(child.system_prompt(role))[:12]}"))
    if parent.prompts.task_template != child.prompts.task_template:
        out.append(Change(part="prompts.task_template", what="changed", proof="a first user message used it"))
    if parent.routing.verification != child.routing.verification:
        out.append(Change(part="routing.verification", what="removed" if child.routing.verification is None else "changed",
                          proof="a finish call was answered by the verification prompt"
                          if child.routing.verification else "a finish call was accepted without a challenge"))
    for key, old, new in (("max_turns", parent.routing.limits.max_turns, child.routing.limits.max_turns),
                          ("max_wall_s", parent.routing.limits.max_wall_s, child.routing.limits.max_wall_s)):
        if old != new:
            out.append(Change(part=f"routing.limits.{key}", what=f"{old} -> {new}",
                              proof="an episode went past the old limit" if _raised(old, new)
                              else "an episode hit the new limit"))
    if parent.routing.context != child.routing.context:
        out.append(Change(part="routing.context", what="changed", proof="(not visible in spans)"))
    if parent.model != child.model:
        out.append(Change(part="model", what="changed", proof="a chat span ran"))
    return out


def measure(store: Store, parent: Harness, child: Harness, trial_ids: list[str],
            parent_trial_ids: list[str], split: str) -> Liveness:
    """Liveness of `child`'s changes in its trials `trial_ids` (one split); the parent's trials on
    the same split judge removals. Read-only; never raises on a well-formed store."""
    found = changes(parent, child)
    spans = _Spans(store, trial_ids)
    if found and not spans.any():  # no evidence either way: never held against the candidate
        return Liveness(split=split, trials=len(trial_ids), live=None, changes=found,
                        reason=f"no spans recorded for its {len(trial_ids)} {split} trial(s) (tracing off?): "
                               "cannot tell whether its changes ran")
    parent_spans = _Spans(store, parent_trial_ids)
    ptools = {t.name: t for t in parent.tools}
    ctools = {t.name: t for t in child.tools}
    for c in found:
        head, _, name = c.part.partition(".")
        if head == "tools" and c.what == "removed":
            _set(c, *parent_spans.calls(name, "the parent"))
        elif head == "tools" and c.proof.endswith("limit mattered"):
            _set(c, *spans.limit_mattered(name, ptools[name], ctools[name]))
        elif head == "tools":
            _set(c, *spans.calls(name, "the child"))
        elif c.part.startswith("role "):
            sha = prompt_sha256(child.system_prompt(c.part[5:]))
            _set(c, *spans.prompt_seen(sha))
        elif c.part == "prompts.task_template":
            _set(c, *spans.first_message(child.prompts.task_template))
        elif c.part == "routing.verification":
            v = child.routing.verification
            _set(c, *(spans.finish_answered(v.prompt) if v else spans.finish_answered("Finished.")))
        elif c.part == "routing.limits.max_turns":
            old, new = parent.routing.limits.max_turns, child.routing.limits.max_turns
            _set(c, *spans.turns(old, new))
        elif c.part == "routing.limits.max_wall_s":
            old, new = parent.routing.limits.max_wall_s, child.routing.limits.max_wall_s
            _set(c, *spans.wall(old, new))
        elif c.part == "model":
            _set(c, *spans.any_chat())
    return _verdict(found, split, len(trial_ids))


def _verdict(found: list[Change], split: str, n: int) -> Liveness:
    live = [c for c in found if c.live]
    unknown = [c for c in found if c.live is None]
    if not found:
        return Liveness(split=split, trials=n, live=False, changes=found,
                        reason="nothing that runs changed (only the name or description)")
    if live:
        return Liveness(split=split, trials=n, live=True, changes=found,
                        reason=f"ran in {split}: " + "; ".join(f"{c.part} ({c.evidence})" for c in live[:4]))
    if unknown:
        return Liveness(split=split, trials=n, live=None, changes=found,
                        reason=f"cannot tell from spans whether {', '.join(c.part for c in unknown)} ran")
    return Liveness(split=split, trials=n, live=False, changes=found,
                    reason=f"none of its changes ran in {n} {split} trial(s): "
                           + "; ".join(f"{c.part} {c.what}: {c.evidence}" for c in found[:4]))


def _set(c: Change, live: bool | None, evidence: str, spans: list[str] | None = None) -> None:
    c.live, c.evidence, c.spans = live, evidence, (spans or [])[:3]


def _raised(old: float | None, new: float | None) -> bool:
    return new is None or (old is not None and new > old)


def _diff_fields(a: ToolDef, b: ToolDef) -> list[str]:
    da, db = a.model_dump(mode="json"), b.model_dump(mode="json")
    return [k for k in db if da.get(k) != db.get(k)]


class _Spans(TrialSpans):
    """The spans of a set of trials, queried lazily (traces.queries.TrialSpans), read as evidence."""

    def _tool_rows(self, name: str) -> list[dict[str, Any]]:
        rows = self.tool_calls(name)
        for r in rows:
            r["a"] = json.loads(r["attributes"]) if r["attributes"] else {}
        return rows

    def calls(self, name: str, who: str) -> tuple[bool, str, list[str]]:
        rows = self._tool_rows(name)
        trials = len({r["trial_id"] for r in rows})
        if not rows:
            return False, f"{who} never called {name} in {len(self.ids)} trial(s)", []
        return True, f"{who} called {name} {len(rows)} time(s) in {trials} trial(s)", [r["span_id"] for r in rows]

    def limit_mattered(self, name: str, old: ToolDef, new: ToolDef) -> tuple[bool, str, list[str]]:
        rows = self._tool_rows(name)
        if not rows:
            return False, f"{name} never called in {len(self.ids)} trial(s)", []
        hit: list[str] = []
        notes = []
        if old.timeout_s != new.timeout_s:
            if new.timeout_s > old.timeout_s:
                hit += [r["span_id"] for r in rows if (r["a"].get("metaopt.tool.duration_s") or 0) > old.timeout_s]
            else:
                hit += [r["span_id"] for r in rows if r["a"].get("metaopt.tool.timed_out") is True]
            notes.append(f"timeout {old.timeout_s:g} -> {new.timeout_s:g} s")
        if old.output_limit != new.output_limit:
            low = min(old.output_limit, new.output_limit)
            hit += [r["span_id"] for r in rows if (r["a"].get("metaopt.tool.output_chars") or 0) > low]
            notes.append(f"output_limit {old.output_limit} -> {new.output_limit}")
        what = ", ".join(notes)
        if hit:
            return True, f"{what} mattered in {len(set(hit))} of {len(rows)} call(s)", hit
        return False, f"{what} mattered in none of {len(rows)} call(s)", []

    def prompt_seen(self, sha: str) -> tuple[bool, str, list[str]]:
        rows = self.chats(sha)
        if not rows:
            return False, f"no chat span carried prompt sha256 {sha[:12]}", []
        return True, f"prompt sha256 {sha[:12]} on {len(rows)} chat span(s) in {len({r['trial_id'] for r in rows})} trial(s)", \
            [r["span_id"] for r in rows]

    def first_message(self, template: str) -> tuple[bool, str, list[str]]:
        head, _, tail = template.partition("{instruction}")
        rows = self.first_user_messages()
        ok = [r for r in rows if (r["text"] or "").startswith(head) and (r["text"] or "").endswith(tail)]
        if not ok:
            return False, f"no first user message used the new template ({len(rows)} seen)", []
        return True, f"{len({r['trial_id'] for r in ok})} trial(s) started with the new template", [r["span_id"] for r in ok]

    def finish_answered(self, reply: str) -> tuple[bool, str, list[str]]:
        rows = self.tool_results("finish", reply)
        if not rows:
            return False, "no finish call got that answer", []
        return True, f"{len(rows)} finish call(s) answered with it", [r["span_id"] for r in rows]

    def turns(self, old: int, new: int) -> tuple[bool, str, list[str]]:
        eps = self.episodes()
        if new > old:
            past = [e for e in eps if e["chats"] > old]
            return bool(past), f"{len(past)} of {len(eps)} episode(s) made more than {old} model calls", \
                [e["span_id"] for e in past]
        hit = [e for e in eps if e["outcome"] == "turn_limit"]
        return bool(hit), f"{len(hit)} of {len(eps)} episode(s) ended at the turn limit", [e["span_id"] for e in hit]

    def wall(self, old: float | None, new: float | None) -> tuple[bool, str, list[str]]:
        eps = self.episodes()
        if _raised(old, new):
            past = [e for e in eps if old is None or (e["duration_ms"] or 0) > old * 1000]
            return bool(past), f"{len(past)} of {len(eps)} episode(s) ran past {old} s", [e["span_id"] for e in past]
        hit = [e for e in eps if e["outcome"] == "time_limit"]
        return bool(hit), f"{len(hit)} of {len(eps)} episode(s) hit the time limit", [e["span_id"] for e in hit]

    def any_chat(self) -> tuple[bool, str, list[str]]:
        rows = self.chats()
        return bool(rows), f"{len(rows)} chat span(s)", [r["span_id"] for r in rows]
