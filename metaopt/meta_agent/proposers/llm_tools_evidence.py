"""The meta-agent's evidence tools: the failing train trials, and only those.

  list_failures()                                  the failing train trials, one line each
  failure_clusters()                               those trials grouped by failure signature
  read_trial(trial_id, offset=0, limit)            raw transcript + verifier output, paginated
  search_traces(pattern, limit=50)                 ILIKE over those trials' messages: span ids, snippets
  read_harness()                                   the parent harness as YAML, prompts inline

Any trial id outside `evidence.trial_ids` is refused with an error result, so the sealed test split
and the gate's validation trials stay out of reach.
"""

from __future__ import annotations

import json
from typing import Any

from metaopt.core.errors import ToolError
from metaopt.meta_agent.proposers import failures
from metaopt.meta_agent.proposers import history_view as view
from metaopt.meta_agent.proposers.llm_specs import MAX_PAGE
from metaopt.meta_agent.proposers.llm_tools_base import SessionBase
from metaopt.meta_agent.proposers.text import clip_text, harness_yaml, render_trial
from metaopt.traces import queries

SNIPPET = 160  # characters either side of a search hit


class EvidenceTools(SessionBase):
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

    def _check_trial(self, trial_id: Any) -> str:
        if not isinstance(trial_id, str) or trial_id not in self.allowed:
            raise ToolError(f"trial {trial_id!r} is not one of the failing training trials you may read "
                            "(list_failures lists them)")
        return trial_id

    def _outcomes(self) -> dict[str, str]:
        if not self.trace_ids:
            return {}
        rows = queries.agent_outcomes(self.store, self.trace_ids)
        return {r["trial_id"]: r["outcome"] for r in rows if r["outcome"]}
