"""The meta-agent's tools: what the `llm` proposer's model may read, edit and write.

    Session(parent, evidence, tried, profile).call(tool_call) -> ToolResultPart; .revision once one is accepted

Evidence tools read the store and only ever show the trials in `evidence.trial_ids` (the parent's
failing *train* trials): any other trial id is refused with an error result, so the sealed test
split and the gate's validation trials stay out of reach.

  list_failures()                                  the failing train trials, one line each
  failure_clusters()                               those trials grouped by failure signature
  read_trial(trial_id, offset=0, limit)            raw transcript + verifier output, paginated
  search_traces(pattern, limit=50)                 ILIKE over those trials' messages: span ids, snippets
  read_harness()                                   the parent harness as YAML, prompts inline

History tools (meta_agent.proposers.history_view) show every earlier candidate of the experiment
with per-task TRAIN results; validation only as the gate's aggregate numbers, test never:

  history(), read_candidate(candidate_id), compare_train_task(task_id, a, b), add_note(text)

Edit tools change a draft of the parent one validated step at a time (meta_agent.proposers.edits):
set_field, edit_prompt, set_tool, remove_tool. Then write_revision(rationale, cause, fixes, keeps,
cites=[], note=None, harness_yaml=None, changes=None, suggested=None) submits the full YAML (when
given) or the draft (after `changes`, field edits, and the briefing's `suggested` edits by number),
with its falsifiable manifest. A revision that does not parse or validate, equals the parent, was
already tried, changes the model section (unless the experiment allows it), names a visible task
id, or claims tasks that are not train tasks in the right state comes back as a tool error the
model can fix; cites that are not ids of the evidence trials or their spans are dropped (and the
model is told). In the compact profile (small models) claims on tasks in the wrong state are
dropped with a note instead, and a task id is read out of a pasted briefing line; arguments a
tool does not take are ignored, and said so.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

import duckdb
import yaml

from metaopt.core.errors import HarnessError, ToolError
from metaopt.meta_agent.predictions import Manifest, passes
from metaopt.meta_agent.proposers import failures
from metaopt.meta_agent.proposers import history as hist
from metaopt.meta_agent.proposers import history_view as view
from metaopt.meta_agent.proposers.base import Evidence, Revision
from metaopt.meta_agent.proposers.edits import Draft, EditError, unoffered, written_calls
from metaopt.meta_agent.proposers.heuristic import causes
from metaopt.meta_agent.proposers.llm_specs import FULL, MAX_PAGE, Profile, tools_for
from metaopt.meta_agent.proposers.text import clip_text, harness_summary, harness_yaml, render_trial
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.harness_io import harness_from_data
from metaopt.task_agent.messages import ToolCallPart, ToolResultPart
from metaopt.traces import queries

SNIPPET = 160  # characters either side of a search hit
MAX_KEEPS = 10  # each keep is a train task the screen runs again: bound what a manifest can cost
TOOLS = tools_for(FULL)


class Session:
    """The tools of one propose() call, bound to its parent, evidence and tried hashes."""

    def __init__(self, parent: Harness, evidence: Evidence, tried: set[str], profile: Profile = FULL,
                 trace_id: str | None = None):
        self.parent, self.store, self.tried, self.profile = parent, evidence.store, tried, profile
        self.experiment_id, self.parent_id, self.trace_id = evidence.experiment_id, evidence.parent_id, trace_id
        self.allow_model_changes, self.evidence = evidence.allow_model_changes, evidence
        self.allowed = list(dict.fromkeys(evidence.trial_ids))
        self.trials = {r["trial_id"]: r for r in queries.trials_by_id(self.store, self.allowed)}
        self.trace_ids = sorted({r["trace_id"] for r in self.trials.values() if r["trace_id"]})
        self.draft = Draft(parent, allow_model_changes=self.allow_model_changes)
        self.records = hist.load(self.store, self.experiment_id)
        self.revision: Revision | None = None
        # which train tasks the parent passes / fails: what a manifest may claim
        scores = hist.train_scores(self.store, self.experiment_id, self.parent_id) if self.parent_id else {}
        self.failing_tasks = sorted({r["task_id"] for r in self.trials.values()}
                                    | {t for t, s in scores.items() if passes(s) is False})
        self.passing_tasks = sorted(t for t, s in scores.items() if passes(s) and t not in self.failing_tasks)

    def call(self, call: ToolCallPart) -> ToolResultPart:
        names = self.profile.tools
        try:
            if call.arguments_error:
                raise ToolError(f"arguments are not a JSON object: {call.arguments_error}")
            if call.name not in names:
                raise ToolError(f"unknown tool {call.name!r} (tools: {', '.join(names)})")
            fn = getattr(self, call.name)
            params = inspect.signature(fn).parameters
            args, ignored = dict(call.arguments), []
            if not any(v.kind is inspect.Parameter.VAR_KEYWORD for v in params.values()):
                ignored = sorted(set(args) - set(params))  # small models add arguments a tool does not take
                args = {k: v for k, v in args.items() if k in params}
            try:
                out = fn(**args)
                if ignored:
                    out += f"\n[ignored unknown argument(s): {', '.join(ignored)}]"
            except TypeError as e:  # missing / unexpected arguments
                raise ToolError(f"bad arguments for {call.name}: {e}") from None
            except duckdb.Error as e:  # e.g. a pattern DuckDB cannot use, a read-only store
                raise ToolError(f"{call.name} failed: {str(e).splitlines()[0]}") from None
            except (EditError, KeyError) as e:
                raise ToolError(str(e.args[0]) if e.args else str(e)) from None
            return ToolResultPart(id=call.id, response=out)
        except ToolError as e:
            return ToolResultPart(id=call.id, response=f"error: {e}", is_error=True)

    def briefing(self) -> str:
        """The first user message: the failures, the notebook, the history in one line, the task."""
        p = self.profile
        short = (self.parent_id or "").rsplit("/", 1)[-1] or "the parent"
        out = [f"The parent harness '{self.parent.name}' ({short}) failed {len(self.allowed)} training trial(s).",
               self.list_failures(clip=p.clip), self.signals(), self.suggestions(),
               view.clusters_text(self.store, self.allowed, brief=True),
               "Train tasks the parent passes: " + (", ".join(self.passing_tasks) or "none known") + ".",
               view.notebook_text(hist.notes(self.store, self.experiment_id), clip=p.clip * 3)]
        earlier = [r for r in self.records if r.iteration > 0]
        if earlier:
            counts = ", ".join(f"{r.short} {r.status}" for r in earlier[-8:])
            out.append(f"Earlier candidates of this experiment: {len(earlier)} ({counts}). Call history first to "
                       "see what each changed and how it did, and do not repeat what failed.")
        else:
            out.append("This is the first proposal of the experiment: there is no history yet.")
        if p.name == "compact":
            out.append("The parent harness (read_harness shows it all):\n" + harness_summary(self.parent, p.clip * 2))
        out.append("Diagnose the failures from the traces, change the harness with the edit tools (set_field, "
                   "edit_prompt, set_tool, remove_tool) or a full harness_yaml, then call write_revision with the "
                   "cause you address, the train tasks it should fix and the passing ones it must keep.")
        return "\n\n".join(out)

    def signals(self) -> str:
        """What the failing trials' spans say about the harness's knobs, with the knobs' values."""
        tools = {t.name: t for t in self.parent.tools}
        lines = []
        for cause, n, _, target, tasks, most in causes(self.evidence):
            t = tools.get(target)
            lines.append({"turn_limit": f"{n} episode(s) ended at the turn limit (routing.limits.max_turns is "
                                        f"{self.parent.routing.limits.max_turns})",
                          "timeout": f"{n} call(s) of {target} timed out"
                                     + (f" (tools.{target}.timeout_s is {t.timeout_s:g})" if t else ""),
                          "truncated": f"{n} output(s) of {target} were truncated" + (
                              f" (tools.{target}.output_limit is {t.output_limit}; the longest was {most or '?'} "
                              "characters)" if t else "")}[cause]
                         + f", in tasks {', '.join(tasks[:8])}")
        offered = {t.name for t in self.parent.tools_for(self.parent.routing.start_role)}
        lines += failures.tool_errors(self.evidence, offered if len(self.parent.routing.roles) == 1 else set(tools))
        lines += failures.context_drops(self.evidence, self.parent.routing.context.max_tokens)
        return ("Signals in their spans: " + "; ".join(lines) + ".") if lines else \
            ("Signals in their spans: no turn limit, tool timeout, truncated output or failed tool call: no "
             "limit of the harness stopped the agent, so look at what it was told and what its tools did (the "
             "verifier's failure lines say what the tests expected).")

    def suggestions(self) -> str:
        return failures.suggestions_text(self.parent, self.evidence, self.tried)

    def _check_trial(self, trial_id: Any) -> str:
        if not isinstance(trial_id, str) or trial_id not in self.allowed:
            raise ToolError(f"trial {trial_id!r} is not one of the failing training trials you may read "
                            "(list_failures lists them)")
        return trial_id

    # -- tools -----------------------------------------------------------------------------------------
    def list_failures(self, clip: int = 300) -> str:
        outcomes = self._outcomes()
        n = 10 if clip >= 1000 else 3  # failed test names shown per trial
        lines = [f"{len(self.allowed)} failing training trial(s):"]
        for tid in self.allowed:
            r = self.trials.get(tid)
            if r is None:
                lines.append(f"- {tid}: (no trial row in the store)")
                continue
            tests = json.loads(r["tests"]) if r["tests"] else {}
            failed = [t for t, v in tests.items() if v != "passed"]
            summary = (f"tests {len(tests) - len(failed)}/{len(tests)} passed"
                       + (f", failed: {', '.join(failed[:n])}{' ...' if len(failed) > n else ''}" if failed else "")
                       if tests else "no per-test results")
            said = "" if tests else failures.verifier_says(r.get("test_output"))
            summary += f" (verifier: {clip_text(said, clip)})" if said else ""
            score = "-" if r["score"] is None else f"{r['score']:.2f}"
            lines.append(f"- task {r['task_id']}: status {r['status']}, failure_mode {r['failure_mode'] or '-'}, "
                         f"score {score}, episode outcome {outcomes.get(tid, '-')}, {summary}"
                         + (f"; error: {clip_text(r['error'], clip)}" if r["error"] else "") + f" (trial {tid})")
        return "\n".join(lines)

    def failure_clusters(self) -> str:
        return view.clusters_text(self.store, self.allowed, clip=self.profile.clip)

    def read_trial(self, trial_id: str, offset: int = 0, limit: int | None = None) -> str:
        self._check_trial(trial_id)
        limit = self.profile.page if limit is None else limit
        if not isinstance(offset, int) or not isinstance(limit, int) or offset < 0 or limit < 1:
            raise ToolError("offset must be an integer >= 0 and limit an integer >= 1")
        text = render_trial(self.store, trial_id)
        limit = min(limit, MAX_PAGE if self.profile.name == "full" else 2 * self.profile.page)
        end = min(len(text), offset + limit)
        more = f"next_offset {end}" if end < len(text) else "end of trial"
        return f"[{trial_id}: characters {offset}-{end} of {len(text)}; {more}]\n" + text[offset:end]

    def search_traces(self, pattern: str, limit: int = 50) -> str:
        if not isinstance(pattern, str) or not pattern.strip():
            raise ToolError("pattern must be a non-empty string")
        if not isinstance(limit, int) or limit < 1:
            raise ToolError("limit must be an integer >= 1")
        limit = min(limit, 200)
        like = pattern if ("%" in pattern or "_" in pattern) else f"%{pattern}%"
        ids, traces = self.allowed, self.trace_ids or [""]
        rows = queries.search_messages(self.store, ids, traces, like, 4 * limit + 1)
        seen: set[tuple] = set()  # a tool call / result is stored on the chat span and the tool span: show it once
        rows = [r for r in rows if r["trial_id"] in self.allowed and not (
            r["tool_call_id"] and ((k := (r["trial_id"], r["tool_call_id"], r["part_type"], r["text"])) in seen
                                   or seen.add(k)))]
        if not rows:
            return f"no match for {like!r} in the failing trials"
        needle = pattern.strip("%_").split("%")[0].lower()
        out = [f"{min(len(rows), limit)} match(es) for {like!r}" + (" (more not shown)" if len(rows) > limit else "")]
        for r in rows[:limit]:
            text = r["text"] or ""
            at = max(text.lower().find(needle), 0) if needle else 0
            snippet = text[max(0, at - SNIPPET):at + len(needle) + SNIPPET]
            where = f"{r['direction']} {r['part_type']}" + (f" ({r['tool_name']})" if r["tool_name"] else "")
            shown = json.dumps(snippet, ensure_ascii=False)
            out.append(f"- span {r['span_id']} trial {r['trial_id']} {where}: {shown}")
        return "\n".join(out)

    def read_harness(self) -> str:
        return harness_yaml(self.parent)

    # -- history and notebook -------------------------------------------------------------------------
    def history(self) -> str:
        self.records = hist.load(self.store, self.experiment_id)  # outcomes written since (candidates in flight)
        return view.history_text(self.records, clip=self.profile.clip)

    def read_candidate(self, candidate_id: str) -> str:
        self.records = hist.load(self.store, self.experiment_id)  # outcomes written since (candidates in flight)
        rec = view.find(self.records, candidate_id)
        return view.candidate_text(rec, hist.notes(self.store, self.experiment_id), clip=self.profile.clip * 6)

    def compare_train_task(self, task_id: str, a: str, b: str) -> str:
        self.records = hist.load(self.store, self.experiment_id)  # outcomes written since (candidates in flight)
        return view.compare_text(self.store, self.experiment_id, self.records, task_id, a, b,
                                 clip=self.profile.clip * 5)

    def add_note(self, text: str) -> str:
        if not isinstance(text, str) or not text.strip():
            raise ToolError("text must be a non-empty string")
        n = hist.add_note(self.store, self.experiment_id, text, parent_id=self.parent_id, trace_id=self.trace_id)
        return f"noted (#{n.seq})"

    # -- edits -----------------------------------------------------------------------------------------
    def set_field(self, path: str, value: Any) -> str:
        return self.draft.set_field(path, value)

    def edit_prompt(self, prompt: str, text: str, section: str | None = None, old: str | None = None) -> str:
        if not isinstance(text, str):
            raise ToolError("text must be a string")
        return self.draft.edit_prompt(prompt, text, section=section or None, old=old or None)

    def set_tool(self, name: str, **fields: Any) -> str:
        return self.draft.set_tool(name, **fields)

    def remove_tool(self, name: str) -> str:
        return self.draft.remove_tool(name)

    # -- the revision ------------------------------------------------------------------------------------
    def write_revision(self, rationale: str, cause: str, fixes: list[str], keeps: list[str],
                       cites: list[str] | None = None, note: str | None = None,
                       harness_yaml: str | None = None, changes: dict[str, Any] | None = None,
                       suggested: list[int] | None = None) -> str:
        cites = [] if cites is None else cites
        if not isinstance(rationale, str) or not rationale.strip():
            raise ToolError("rationale must be a non-empty string")
        if not isinstance(cites, list) or not all(isinstance(c, str) for c in cites):
            raise ToolError("cites must be a list of trial ids / span ids")
        ignored = failures.make_suggested(self.draft, self.parent, self.evidence, self.tried, suggested)
        if changes:  # set_field edits made in the same call (small models write everything at once)
            if not isinstance(changes, dict):
                raise ToolError('changes must be an object of field path -> value, e.g. {"tools.NAME.timeout_s": 60}')
            for path, value in changes.items():
                self.draft.set_field(path, value)
        fixes, keeps = self._written_edits(fixes, keeps, [cause, rationale], harness_yaml)
        child = self._parse(harness_yaml) if harness_yaml not in (None, "") else self._draft()
        self.claim_notes: list[str] = [ignored] if ignored else []
        manifest = self._manifest(cause, fixes, keeps)
        if child.model != self.parent.model and not self.allow_model_changes:
            raise ToolError("the model section changed; it is frozen: copy it unchanged from read_harness")
        h = child.content_hash()
        if h == self.parent.content_hash():
            raise ToolError("the revision is identical to the current harness: change something" + self._hint())
        if h in self.tried:
            raise ToolError("this exact harness was already proposed: propose something different" + self._hint())
        if dead := unoffered(child, self.parent):
            raise ToolError(dead)
        ids = {r["task_id"] for r in self.trials.values() if len(r["task_id"]) >= 6}  # as the Guard does
        named = sorted(ids & _mentions(child, self.parent))
        if named:
            raise ToolError("the harness names a task id; never write task ids, names, instructions or expected "
                            "outputs into the harness")
        if isinstance(note, str) and note.strip():
            self.add_note(note)
        known = [c for c in dict.fromkeys(cites) if c in self._citable()]
        dropped = [c for c in cites if c not in self._citable()]
        child = Harness.model_validate(child.model_dump(mode="json"))  # every field set, as the ledger's parents are:
        self.revision = Revision(child, rationale.strip(), cites=known, manifest=manifest)  # a diff of real changes
        return (f"revision accepted for evaluation (harness {h[:12]})" + "".join(f"; {n}" for n in self.claim_notes) + (
            f"; dropped {len(dropped)} cite(s) that are not trial ids from list_failures or span ids of those "
            f"trials: {', '.join(map(repr, dropped[:10]))}" if dropped else ""))

    def _parse(self, harness_yaml: Any) -> Harness:
        if not isinstance(harness_yaml, str):
            raise ToolError("harness_yaml must be a string (or left out to submit the draft)")
        try:
            raw = yaml.safe_load(harness_yaml)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ToolError(f"invalid YAML{at}: {getattr(e, 'problem', None) or e}") from None
        try:
            return harness_from_data(raw)
        except HarnessError as e:
            raise ToolError(f"invalid harness: {e}") from None

    def _draft(self) -> Harness:
        if not self.draft.changed:
            raise ToolError("no edits to submit: make an edit first (set_field, edit_prompt, set_tool, remove_tool), "
                            "or pass it in `changes` or the full harness_yaml" + self._hint())
        return self.draft.harness()

    def _written_edits(self, fixes: Any, keeps: Any, texts: list[Any], harness_yaml: Any) -> tuple[Any, Any]:
        """Make the set_field calls a model wrote as text into `fixes` or `keeps` (dropped from them),
        or into its cause or rationale when it made no edit; the claim lists keep only task ids."""
        lists = [x for x in (fixes, keeps) if isinstance(x, list)]
        written = written_calls([t for x in lists for t in x])
        if not written and not self.draft.changed and harness_yaml in (None, ""):
            written = written_calls(texts)
        for path, value in written:
            self.draft.set_field(path, value)
        def tasks(x: Any) -> Any:
            return [t for t in x if not written_calls([t])] if isinstance(x, list) else x
        return tasks(fixes), tasks(keeps)

    def _hint(self) -> str:
        calls, _ = failures.suggested_calls(self.parent, self.evidence, self.tried)
        return f"; the signals point at {failures.as_call(calls[0])} (suggested=[1])" if calls else ""

    def _manifest(self, cause: Any, fixes: Any, keeps: Any) -> Manifest:
        if not isinstance(cause, str) or not cause.strip():
            raise ToolError("cause must be a sentence naming the failure cause the revision addresses")
        for name, ids in (("fixes", fixes), ("keeps", keeps)):
            if not isinstance(ids, list) or not all(isinstance(t, str) for t in ids):
                raise ToolError(f"{name} must be a list of train task ids ([] for none)")
        fixes, keeps = self._ids(fixes), self._ids(keeps)
        wrong = {"fixes": [t for t in fixes if t not in self.failing_tasks],
                 "keeps": [t for t in keeps if t not in self.passing_tasks]}
        allowed = {"fixes": ("fails", self.failing_tasks), "keeps": ("passes", self.passing_tasks)}
        for name, bad in wrong.items():
            verb, ok = allowed[name]
            if bad and self.profile.name != "compact":  # a capable model fixes its claim; a small one is helped
                raise ToolError(f"{name} {bad} are not train tasks the parent {verb}; those are: {', '.join(ok) or 'none'}")
            if bad:
                self.claim_notes.append(f"dropped from {name} (not a train task the parent {verb}): {', '.join(bad)}")
        fixes = [t for t in fixes if t not in wrong["fixes"]]
        keeps = [t for t in keeps if t not in wrong["keeps"]]
        if len(keeps) > MAX_KEEPS:
            raise ToolError(f"at most {MAX_KEEPS} keeps (each is run again by the screen)")
        return Manifest(cause=cause.strip(), fixes=fixes, keeps=keeps)

    def _ids(self, given: list[str]) -> list[str]:
        """Task ids as given, or the one known train task id inside an entry (small models paste whole
        lines of the briefing)."""
        known = set(self.failing_tasks) | set(self.passing_tasks)
        out = []
        for t in given:
            t = t.strip()
            found = [k for k in known if re.search(rf"(?<![\w.-]){re.escape(k)}(?![\w.-])", t)]
            out.append(t if t in known or len(found) != 1 else found[0])
        return list(dict.fromkeys(out))

    # -- helpers -----------------------------------------------------------------------------------------
    def _outcomes(self) -> dict[str, str]:
        if not self.trace_ids:
            return {}
        rows = queries.agent_outcomes(self.store, self.trace_ids)
        return {r["trial_id"]: r["outcome"] for r in rows if r["outcome"]}

    def _citable(self) -> set[str]:
        if "_cites" not in self.__dict__:
            spans = queries.span_ids(self.store, self.allowed, self.trace_ids or [""])
            self._cites = set(self.allowed) | spans
        return self._cites

def _mentions(child: Harness, parent: Harness) -> set[str]:
    """Words of the child's text that the parent's text lacks (cheap pre-check; the Guard is the rule)."""
    def words(h: Harness) -> set[str]:
        text = json.dumps(h.model_dump(mode="json"), ensure_ascii=False)
        return set(re.findall(r"[\w.-]+", text))

    return words(child) - words(parent)
