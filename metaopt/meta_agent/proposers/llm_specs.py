"""What the meta-agent is offered: its tools' specs and the budget profiles fitted to its model.

Profiles: `full` (large hosted models: long pages, 30 turns, every tool) and `compact` (small
local models: short pages and clipped history, fewer turns, no search or full-YAML reading, the
parent harness and failures already in the first message). `profile_for(model)` picks compact
for `local/...` and `local:...` models.
"""

from __future__ import annotations

from dataclasses import dataclass

from metaopt.task_agent.messages import ToolSpec

MAX_PAGE = 60_000  # characters per read_trial page, whatever the model asks for
_OBJ = {"type": "object", "additionalProperties": False}
_IDS = {"type": "array", "items": {"type": "string"}}
HELD_OUT = ("Validation and test results are never shown per task (validation only as the gate's aggregate "
            "outcome, delta and SE; test is sealed).")


@dataclass(frozen=True)
class Profile:
    name: str
    max_turns: int
    """Model calls per proposal."""
    max_context_chars: int
    """History budget: older tool results are elided beyond it."""
    page: int
    """read_trial's default (and, for compact, largest) page in characters."""
    clip: int
    """Characters of free text (rationales, diffs, outputs) in history results."""
    max_tokens: int
    """Output tokens per model call."""
    tools: tuple[str, ...]
    max_calls: int = 32
    """Tool calls run per reply; the rest are dropped from the history (a small model repeating one
    call dozens of times in a reply filled a local model's context window on meta-bench)."""


ALL = ("list_failures", "failure_clusters", "read_trial", "search_traces", "read_harness", "history", "read_candidate",
       "compare_train_task", "add_note", "set_field", "edit_prompt", "set_tool", "remove_tool", "write_revision")
FULL = Profile("full", max_turns=30, max_context_chars=400_000, page=20_000, clip=4000, max_tokens=16_000, tools=ALL)
COMPACT = Profile("compact", max_turns=10, max_context_chars=24_000, page=2500, clip=600, max_tokens=512,
                  tools=("read_trial", "read_harness", "history", "read_candidate", "add_note", "set_field",
                         "edit_prompt", "set_tool", "write_revision"), max_calls=6)
PROFILES = {p.name: p for p in (FULL, COMPACT)}


def profile_for(model_name: str) -> Profile:
    return COMPACT if model_name.startswith(("local/", "local:")) else FULL


def _spec(name: str, description: str, properties: dict | None = None, required: list[str] | None = None) -> ToolSpec:
    params = {**_OBJ, "properties": properties or {}}
    if required:
        params["required"] = required
    return ToolSpec(name=name, description=description, parameters=params)


SPECS = {s.name: s for s in [
    _spec("list_failures", "List the parent's failing training trials you may read: trial id, task id, status, "
          "failure mode, score, the episode's outcome and the verifier's per-test results."),
    _spec("failure_clusters", "The failing training trials grouped by failure signature (failure mode, the last "
          "error with numbers, paths and ids masked, the tool and its exit status, where in the episode), largest "
          "first: size, tasks, example trial and span ids."),
    _spec("read_trial", "The raw transcript of one failing training trial (system prompt, messages with reasoning, "
          "tool calls with arguments and outputs) then the verifier output. Paginated: call again with next_offset.",
          {"trial_id": {"type": "string", "description": "A failing trial id."},
           "offset": {"type": "integer", "minimum": 0, "default": 0},
           "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}}, ["trial_id"]),
    _spec("search_traces", "Case-insensitive SQL ILIKE search over every message part of the failing trials (without "
          "% or _ it matches anywhere). Returns span ids, trial ids and snippets.",
          {"pattern": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}},
          ["pattern"]),
    _spec("read_harness", "The parent harness as YAML with every prompt inline (the format write_revision takes)."),
    _spec("history", "Every earlier candidate of this experiment: parent, proposer, status and why, rationale, its "
          "claim and whether it held, liveness, gate numbers, which train tasks it fixed or broke. " + HELD_OUT),
    _spec("read_candidate", "One earlier candidate in full: diff against its parent, gate rows, per-task TRAIN results "
          "next to its parent's, its claim and the check of it, its notes. " + HELD_OUT,
          {"candidate_id": {"type": "string", "description": "e.g. c2"}}, ["candidate_id"]),
    _spec("compare_train_task", "One TRAIN task side by side under two candidates: their trials and a step-by-step "
          "digest of each transcript. Only train tasks. " + HELD_OUT,
          {"task_id": {"type": "string"}, "a": {"type": "string", "description": "candidate, e.g. c0"},
           "b": {"type": "string", "description": "candidate, e.g. c2"}}, ["task_id", "a", "b"]),
    _spec("add_note", "Add an entry to your notebook for this experiment (kept across proposals and shown at the start "
          "of each): what you tried, what you learned, what to try next.",
          {"text": {"type": "string"}}, ["text"]),
    _spec("set_field", "Edit the draft: set one harness field by dotted path, e.g. routing.limits.max_turns = 16, "
          "tools.bash.timeout_s = 60, prompts.system = \"...\". null resets it to its default. Validated at once.",
          {"path": {"type": "string"}, "value": {"description": "any JSON value"}}, ["path", "value"]),
    _spec("edit_prompt", "Edit the draft's prompt (system, task_template, verification or roles.NAME): with old, "
          "replace that exact text by text; with section, set the body of that markdown section (added if missing); "
          "else append text.",
          {"prompt": {"type": "string", "default": "system"}, "text": {"type": "string"},
           "section": {"type": "string"}, "old": {"type": "string"}}, ["prompt", "text"]),
    _spec("set_tool", "Edit the draft: add a tool, or change fields of an existing one (only the fields given). "
          "kind is shell (template: the command, {arg} inserts an argument quoted, {arg!raw} raw), python (script), "
          "finish or agent.",
          {"name": {"type": "string"}, "kind": {"type": "string", "enum": ["shell", "python", "finish", "agent"]},
           "description": {"type": "string"}, "parameters": {"type": "object", "description": "JSON schema"},
           "template": {"type": "string"}, "script": {"type": "string"}, "timeout_s": {"type": "number"},
           "output_limit": {"type": "integer"}, "session": {"type": "string", "enum": ["persistent", "fresh"]}},
          ["name"]),
    _spec("remove_tool", "Edit the draft: remove a tool.", {"name": {"type": "string"}}, ["name"]),
    _spec("write_revision", "Submit the revision with its falsifiable claim: the failure cause addressed, the train "
          "tasks it should flip to passing (fixes) and passing train tasks it must not break (keeps); they are checked "
          "against real train results. Without harness_yaml it submits the draft built with the edit tools. Invalid "
          "input comes back as an error to fix; a valid revision ends the session.",
          {"rationale": {"type": "string", "description": "What failed, why, and what each change fixes."},
           "cause": {"type": "string", "description": "The failure cause addressed, one sentence."},
           "fixes": {**_IDS, "description": "Train task ids (failing now) this should make pass."},
           "keeps": {**_IDS, "description": "Train task ids (passing now) this must not break."},
           "cites": {**_IDS, "description": "Trial ids and span ids of the evidence."},
           "note": {"type": "string", "description": "A notebook entry: what you tried and what to try next."},
           "changes": {"type": "object", "description": "Optional: field edits to make first, dotted path -> value "
                       "(the path a signal names)."},
           "suggested": {"type": "array", "items": {"type": "integer"}, "description": "Optional: numbers of the "
                         "briefing's suggested edits to make first (\"Edits the signals point at\")."},
           "harness_yaml": {"type": "string", "description": "Optional: the complete harness YAML, prompts inline."}},
          ["rationale", "cause", "fixes", "keeps"]),
]}


# The compact profile's specs: one-line descriptions and only the arguments a small model needs
# (every spec is in its prompt, at every turn: on 2 CPU cores each token of it costs time).
SHORT = {
    "read_trial": ("Raw transcript of one failing trial, paged (pass next_offset).", ["trial_id", "offset"]),
    "read_harness": ("The parent harness as YAML.", []),
    "history": (("Earlier candidates: change, status and why, claim check, train tasks fixed/broken. Validation and "
                "test never per task."), []),
    "read_candidate": ("One earlier candidate: its diff, gate numbers, per-task train results.", ["candidate_id"]),
    "add_note": ("Add a notebook entry, kept for your next proposals.", ["text"]),
    "set_field": ("Set a harness field by dotted path (tools.NAME.FIELD, routing.roles.NAME.tools, ...).",
                  ["path", "value"]),
    "edit_prompt": (("Edit a prompt (system, task_template, verification, roles.NAME): replace old text, set a section, "
                    "or append text."), ["prompt", "text", "section", "old"]),
    "set_tool": ("Add a tool or change some of its fields.", ["name", "kind", "description", "template", "timeout_s",
                                                             "output_limit", "parameters"]),
    "write_revision": (("Submit your edits with your claim: cause, fixes (failing train tasks it should fix), keeps "
                       "(passing ones it must not break), a notebook note; suggested: numbers of the suggested edits "
                       "to make; changes: more field edits, path -> value."),
                       ["suggested", "changes", "rationale", "cause", "fixes", "keeps", "note"]),
}


def _compact(spec: ToolSpec) -> ToolSpec:
    text, keep = SHORT[spec.name]
    props = {k: {x: y for x, y in v.items() if x in ("type", "items", "enum")}
             for k, v in spec.parameters.get("properties", {}).items() if k in keep}
    params = {"type": "object", "properties": props}
    required = spec.parameters.get("required", []) + (["note"] if spec.name == "write_revision" else [])
    if req := [r for r in required if r in keep]:  # a small model fills the slots it is given: the note is one
        params["required"] = req
    return ToolSpec(name=spec.name, description=text, parameters=params)


def tools_for(profile: Profile) -> list[ToolSpec]:
    if profile.name == "compact":
        return [_compact(SPECS[n]) for n in profile.tools]
    return [SPECS[n] for n in profile.tools]
