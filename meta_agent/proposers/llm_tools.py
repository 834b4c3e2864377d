"""The meta-agent's tools: what the `llm` proposer's model may read and the one thing it may write.

    Session(parent, evidence, tried).call(tool_call) -> ToolResultPart; .revision once one is accepted

The tools read the store and only ever show the trials in `evidence.trial_ids` (the parent's
failing *train* trials): any other trial id is refused with an error result, so the sealed test
split and the gate's validation trials stay out of reach.

  list_failures()                                  the failing train trials, one line each
  read_trial(trial_id, offset=0, limit=20000)      raw transcript + verifier output, paginated
  search_traces(pattern, limit=50)                 ILIKE over those trials' messages: span ids, snippets
  read_harness()                                   the parent harness as YAML, prompts inline
  write_revision(harness_yaml, rationale, cites)   validate; on success the session ends

A revision that does not parse or validate, equals the parent, was already tried, changes the
model section or names a visible task id comes back as a tool error the model can fix; cites that
are not ids of the evidence trials or their spans are dropped (and the model is told).
"""

from __future__ import annotations

import json
import re
from typing import Any

import duckdb
import yaml

from core.errors import ToolError
from meta_agent.proposers.base import Evidence, Revision
from task_agent.harness import Harness, HarnessError
from task_agent.harness_io import _Dumper, harness_from_data
from task_agent.messages import ToolCallPart, ToolResultPart, ToolSpec
from traces.queries import show_trial

MAX_PAGE = 60_000  # characters per read_trial page, whatever the model asks for
SNIPPET = 160  # characters either side of a search hit

_OBJ = {"type": "object", "additionalProperties": False}
TOOLS = [
    ToolSpec(name="list_failures", description="List the failing training trials you may read: trial id, task id, "
             "status, failure mode, score, the episode's outcome and the verifier's per-test results.",
             parameters={**_OBJ, "properties": {}}),
    ToolSpec(name="read_trial", description="The raw transcript of one failing trial (system prompt, messages with "
             "reasoning, tool calls with arguments and outputs) followed by the verifier output. Paginated by "
             "characters: call again with the returned next_offset to continue.",
             parameters={**_OBJ, "properties": {
                 "trial_id": {"type": "string", "description": "A trial id from list_failures."},
                 "offset": {"type": "integer", "minimum": 0, "default": 0},
                 "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 20000}},
                 "required": ["trial_id"]}),
    ToolSpec(name="search_traces", description="Case-insensitive SQL ILIKE search over every message part (text, "
             "reasoning, tool arguments and outputs) of the failing trials. Without % or _ in the pattern it "
             "matches anywhere. Returns span ids, trial ids and snippets.",
             parameters={**_OBJ, "properties": {
                 "pattern": {"type": "string"},
                 "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}},
                 "required": ["pattern"]}),
    ToolSpec(name="read_harness", description="The current (parent) harness as YAML with every prompt inline: the "
             "format write_revision takes.", parameters={**_OBJ, "properties": {}}),
    ToolSpec(name="write_revision", description="Submit the complete revised harness. It is validated; an error comes "
             "back as the tool result so you can fix it and call again. A valid revision ends the session.",
             parameters={**_OBJ, "properties": {
                 "harness_yaml": {"type": "string", "description": "The full harness YAML, prompts inline."},
                 "rationale": {"type": "string", "description": "What failed, why, and what each change fixes."},
                 "cites": {"type": "array", "items": {"type": "string"},
                           "description": "Trial ids and span ids whose evidence supports the revision."}},
                 "required": ["harness_yaml", "rationale", "cites"]}),
]


class Session:
    """The tools of one propose() call, bound to its parent, evidence and tried hashes."""

    def __init__(self, parent: Harness, evidence: Evidence, tried: set[str]):
        self.parent, self.store, self.tried = parent, evidence.store, tried
        self.allowed = list(dict.fromkeys(evidence.trial_ids))
        marks = ", ".join("?" * len(self.allowed))
        self.trials = {r["trial_id"]: r for r in self.store.rows(
            "SELECT trial_id, task_id, attempt, status, score, failure_mode, error, tests, trace_id"
            f" FROM trials WHERE trial_id IN ({marks}) ORDER BY task_id, attempt", self.allowed)}
        self.trace_ids = sorted({r["trace_id"] for r in self.trials.values() if r["trace_id"]})
        self.revision: Revision | None = None

    def call(self, call: ToolCallPart) -> ToolResultPart:
        tools = {"list_failures": self.list_failures, "read_trial": self.read_trial,
                 "search_traces": self.search_traces, "read_harness": self.read_harness,
                 "write_revision": self.write_revision}
        try:
            if call.arguments_error:
                raise ToolError(f"arguments are not a JSON object: {call.arguments_error}")
            if call.name not in tools:
                raise ToolError(f"unknown tool {call.name!r} (tools: {', '.join(tools)})")
            try:
                out = tools[call.name](**call.arguments)
            except TypeError as e:  # missing / unexpected arguments
                raise ToolError(f"bad arguments for {call.name}: {e}") from None
            except duckdb.Error as e:  # e.g. a pattern DuckDB cannot use
                raise ToolError(f"{call.name} failed: {str(e).splitlines()[0]}") from None
            return ToolResultPart(id=call.id, response=out)
        except ToolError as e:
            return ToolResultPart(id=call.id, response=f"error: {e}", is_error=True)

    def _check_trial(self, trial_id: Any) -> str:
        if not isinstance(trial_id, str) or trial_id not in self.allowed:
            raise ToolError(f"trial {trial_id!r} is not one of the failing training trials you may read "
                            "(list_failures lists them)")
        return trial_id

    # -- tools -----------------------------------------------------------------------------------------
    def list_failures(self) -> str:
        outcomes = self._outcomes()
        lines = [f"{len(self.allowed)} failing training trial(s):"]
        for tid in self.allowed:
            r = self.trials.get(tid)
            if r is None:
                lines.append(f"- {tid}: (no trial row in the store)")
                continue
            tests = json.loads(r["tests"]) if r["tests"] else {}
            failed = [t for t, v in tests.items() if v != "passed"]
            summary = (f"tests {len(tests) - len(failed)}/{len(tests)} passed"
                       + (f", failed: {', '.join(failed[:10])}{' ...' if len(failed) > 10 else ''}" if failed else "")
                       if tests else "no per-test results")
            score = "-" if r["score"] is None else f"{r['score']:.2f}"
            lines.append(f"- {tid}: task {r['task_id']}, status {r['status']}, failure_mode "
                         f"{r['failure_mode'] or '-'}, score {score}, episode outcome {outcomes.get(tid, '-')}, "
                         f"{summary}" + (f"; error: {_clip(r['error'], 300)}" if r["error"] else ""))
        return "\n".join(lines)

    def read_trial(self, trial_id: str, offset: int = 0, limit: int = 20_000) -> str:
        self._check_trial(trial_id)
        if not isinstance(offset, int) or not isinstance(limit, int) or offset < 0 or limit < 1:
            raise ToolError("offset must be an integer >= 0 and limit an integer >= 1")
        text = self._render(trial_id)
        limit = min(limit, MAX_PAGE)
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
        rows = self.store.rows(
            "SELECT m.span_id, coalesce(m.trial_id, t.trial_id) AS trial_id, m.direction, m.role, m.part_type,"
            " m.tool_name, m.tool_call_id, m.text FROM messages m LEFT JOIN trials t ON t.trace_id = m.trace_id"
            f" WHERE (m.trial_id IN ({', '.join('?' * len(ids))}) OR m.trace_id IN ({', '.join('?' * len(traces))}))"
            " AND m.text ILIKE ? ORDER BY m.trace_id, m.idx NULLS FIRST, m.span_id, m.part_idx LIMIT ?",
            [*ids, *traces, like, 4 * limit + 1])
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

    def write_revision(self, harness_yaml: str, rationale: str, cites: list[str]) -> str:
        if not isinstance(harness_yaml, str) or not isinstance(rationale, str) or not rationale.strip():
            raise ToolError("harness_yaml must be a string and rationale a non-empty string")
        if not isinstance(cites, list) or not all(isinstance(c, str) for c in cites):
            raise ToolError("cites must be a list of trial ids / span ids")
        try:
            raw = yaml.safe_load(harness_yaml)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ToolError(f"invalid YAML{at}: {getattr(e, 'problem', None) or e}") from None
        try:
            child = harness_from_data(raw)
        except HarnessError as e:
            raise ToolError(f"invalid harness: {e}") from None
        if child.model != self.parent.model:
            raise ToolError("the model section changed; it is frozen: copy it unchanged from read_harness")
        h = child.content_hash()
        if h == self.parent.content_hash():
            raise ToolError("the revision is identical to the current harness: change something")
        if h in self.tried:
            raise ToolError("this exact harness was already proposed in this experiment: propose something different")
        ids = {r["task_id"] for r in self.trials.values() if len(r["task_id"]) >= 6}  # as the Guard does
        named = sorted(ids & _mentions(child, self.parent))
        if named:
            raise ToolError("the harness names a task id; never write task ids, names, instructions or expected "
                            "outputs into the harness")
        known = [c for c in dict.fromkeys(cites) if c in self._citable()]
        dropped = [c for c in cites if c not in self._citable()]
        child = Harness.model_validate(child.model_dump(mode="json"))  # every field set, as the ledger's parents are:
        self.revision = Revision(child, rationale.strip(), cites=known)  # its diff then shows only real changes
        return (f"revision accepted for evaluation (harness {h[:12]})" + (
            f"; dropped {len(dropped)} cite(s) that are not trial ids from list_failures or span ids of those "
            f"trials: {', '.join(map(repr, dropped[:10]))}" if dropped else ""))

    # -- helpers -----------------------------------------------------------------------------------------
    def _outcomes(self) -> dict[str, str]:
        if not self.trace_ids:
            return {}
        rows = self.store.rows(
            "SELECT t.trial_id, s.attributes->>'$.\"metaopt.outcome\"' AS outcome FROM spans s"
            " JOIN trials t ON t.trace_id = s.trace_id WHERE s.operation_name = 'invoke_agent'"
            f" AND s.trace_id IN ({', '.join('?' * len(self.trace_ids))})", self.trace_ids)
        return {r["trial_id"]: r["outcome"] for r in rows if r["outcome"]}

    def _citable(self) -> set[str]:
        if "_cites" not in self.__dict__:
            spans = self.store.rows(
                f"SELECT span_id FROM spans WHERE trial_id IN ({', '.join('?' * len(self.allowed))})"
                f" OR trace_id IN ({', '.join('?' * len(self.trace_ids or ['']))})",
                [*self.allowed, *(self.trace_ids or [""])])
            self._cites = set(self.allowed) | {r["span_id"] for r in spans}
        return self._cites

    def _render(self, trial_id: str) -> str:
        """The trial as plain text: everything show_trial returns, nothing summarised."""
        try:
            t = show_trial(self.store, trial_id)
        except KeyError:
            return f"trial {trial_id}: no trial row and no spans in the store"
        row, agent = t["trial"] or {}, t["agent"] or {}
        out = [f"=== trial {trial_id} ==="]
        for k in ("task_id", "attempt", "status", "score", "failure_mode", "error", "agent_timed_out",
                  "duration_s", "agent_duration_s", "input_tokens", "output_tokens", "cost_usd"):
            if row.get(k) is not None:
                out.append(f"{k}: {row[k]}")
        if agent:
            out.append(f"episode: outcome {agent.get('outcome')}, status {agent.get('status_code')}"
                       + (f", error {agent['error_type']}: {agent.get('status_message')}"
                          if agent.get("error_type") else "")
                       + f", {agent.get('duration_ms') or 0:.0f} ms")
        if row.get("agent_log"):
            out += ["--- agent log ---", row["agent_log"]]
        out.append("=== transcript ===")
        shown: set[str] = set()
        for e in t["transcript"]:
            if e["type"] == "system":
                out += [f"[system prompt] (span {e['span_id']})", _parts(e["parts"])]
            elif e["type"] == "tool":
                shown.add(e["call_id"] or "")
                flags = ", ".join(f"{k} {v}" for k, v in e["extra"].items())
                err = f", error {e['error_type']}" if e["error_type"] else ""
                out += [f"[tool {e['name']} call {e['call_id']}] (span {e['span_id']}; {e['duration_ms'] or 0:.0f} ms"
                        f"{err}{'; ' + flags if flags else ''})",
                        f"arguments: {json.dumps(e['arguments'], ensure_ascii=False)}",
                        "output:", e["result"] if e["result"] is not None else "(none recorded)"]
            else:
                parts = [p for p in e["parts"] if not (p.get("type") == "tool_call_response" and p.get("id") in shown)]
                if not parts:
                    continue  # tool results already shown with their tool call
                finish = f"; finish {','.join(e.get('finish_reasons') or [])}" if e["direction"] == "output" else ""
                out += [f"[{e['role']} #{e['idx']}] (span {e['span_id']}{finish})", _parts(parts)]
        out.append("=== verifier ===")
        out.append(f"exit code: {row.get('verifier_exit_code')}; per-test results: {row.get('tests') or '-'}")
        if row.get("rewards"):
            out.append(f"rewards: {row['rewards']}")
        out.append(row.get("test_output") or "(no verifier output recorded)")
        return "\n".join(str(x) for x in out) + "\n"


def _parts(parts: list[dict]) -> str:
    lines = []
    for p in parts:
        kind = p.get("type")
        if kind == "text":
            lines.append(p.get("content", ""))
        elif kind == "reasoning":
            lines.append(f"<reasoning>\n{p.get('content', '')}\n</reasoning>")
        elif kind == "tool_call":
            lines.append(f"-> tool_call {p.get('name')} (id {p.get('id')}): "
                         f"{json.dumps(p.get('arguments'), ensure_ascii=False)}")
        elif kind == "tool_call_response":
            error = " (error)" if p.get("is_error") else ""
            lines.append(f"<- result of {p.get('id')}{error}:\n{p.get('response', '')}")
        else:
            lines.append(json.dumps(p, ensure_ascii=False))
    return "\n".join(lines)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + " ..."


def _mentions(child: Harness, parent: Harness) -> set[str]:
    """Words of the child's text that the parent's text lacks (cheap pre-check; the Guard is the rule)."""
    def words(h: Harness) -> set[str]:
        text = json.dumps(h.model_dump(mode="json"), ensure_ascii=False)
        return set(re.findall(r"[\w.-]+", text))

    return words(child) - words(parent)


def harness_yaml(h: Harness) -> str:
    """`h` as one YAML document, prompts inline, defaults left out (harness_from_data reads it back)."""
    return yaml.dump(h.model_dump(mode="json", exclude_defaults=True), Dumper=_Dumper, sort_keys=False,
                     allow_unicode=True, width=10_000)
