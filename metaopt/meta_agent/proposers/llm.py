"""`llm`: a model-driven meta-agent. It reads the raw traces of the parent's failing train trials
and the experiment's history through read-only tools, edits a draft of the harness, and writes one
revision with a falsifiable claim.

    LLMProposer("anthropic/claude-opus-4-1").propose(parent, evidence, tried) -> Revision | None

The meta-agent runs its own small tool-calling loop (not the task agent's, which runs tools in a
sandbox). Its tools live in `llm_tools` (what each shows and what a revision must pass) and
`llm_specs` (their specs and the budget profiles: `full` for large models, `compact` for small
local ones, chosen by model name). They only ever show the parent's failing *train* trials and,
from the history, train results per task: the sealed test split and the gate's validation trials
stay out of reach (validation only as aggregate numbers).

Small models loop: a call repeated with the same arguments (any edit, note or submission; in
the compact profile any call) is not run again but answered "not run again"; a turn made only of
repeats (a submission repeats only with the same draft) gets a user message with the draft so far and is offered only what is left to do:
write_revision once the draft has edits, the edit tools while it has none or write_revision
refused it (already proposed, say: it is told why) until a new edit is made,
and a call to a reading tool (or add_note) not offered is answered "not run" with what is offered
(edits and write_revision still run: it may carry its edits in `changes`); a loop with no edits
yet is told the failing trials' signals and an example edit;
a compact session that loops twice is sampled at temperature 0.7. A reply cut off at max_tokens
in the middle of a call (its JSON incomplete) runs nothing and is dropped from the conversation;
the model is told, and its next call gets twice the output tokens (up to 4x the profile's), at
temperature 0.7 from the second cut in the compact profile.

Traced like the task agent when `evidence.tracing` is set: `invoke_agent meta-agent` > `chat` /
`execute_tool` spans in the store, whose trace id the Revision (and `last_run`) carries.

A session that ends (at `max_turns`, or the model stops calling tools) with edits in its draft
but no revision submits that draft as it stands, through write_revision like any other (it may
still be refused: already tried, say), with the claim of the model's last write_revision call
if it made one, else no stated cause, its failing tasks as fixes and no keeps; outcome
"draft at the turn cap". Small models often edit and never submit: the work is not thrown away,
and the gate judges it like any proposal. The loop returns None when there is no valid revision. Revision.usd sums the responses' cost_usd (an unknown price counts 0 and is noted in the
rationale and in `last_run`).
"""

from __future__ import annotations

import json
import re
import time
import types
import typing
import uuid
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from metaopt.core.errors import ModelError
from metaopt.meta_agent.proposers import failures
from metaopt.meta_agent.proposers.base import Evidence, Revision
from metaopt.meta_agent.proposers.llm_context import first_calls, fit, fit_window
from metaopt.meta_agent.proposers.llm_specs import PROFILES, Profile, profile_for, tools_for
from metaopt.meta_agent.proposers.llm_tools import Session
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.messages import Message, ModelSettings, ToolCallPart, ToolResultPart, Usage
from metaopt.task_agent.models import get_model
from metaopt.task_agent.models.base import CONTEXT_OVERFLOW, Model
from metaopt.task_agent.models.toolcall_text import INVALID

if TYPE_CHECKING:
    from metaopt.task_agent.models.base import Model

PROMPT = Path(__file__).with_name("llm_prompt.md")
COMPACT_PROMPT = Path(__file__).with_name("llm_prompt_compact.md")
NUDGE = ("You answered without calling a tool. Call a tool: an edit tool to change the draft, or "
         "write_revision to submit (rationale, cause, fixes, keeps).")
Wrap = Callable[[ToolCallPart, Callable[[], ToolResultPart]], ToolResultPart]


class LLMProposer:
    name = "llm"
    takes_guidance = True  # Evidence.guidance goes into the opening prompt (the bilevel strategy reads this)

    def __init__(self, model: str | Model, base_url: str | None = None, *, max_turns: int | None = None,
                 max_tokens: int | None = None, reasoning_effort: Literal["low", "medium", "high"] | None = None,
                 max_context_chars: int | None = None, profile: str | Profile | None = None,
                 temperature: float | None = None, on_event: Callable[[str], None] | None = None):
        """`model`: `provider/model` (or a Model object). The client is built now, so a missing
        API key (MissingApiKey) or an unknown provider fails here, before any budget is spent.
        `profile` (`full` | `compact`, default by model name) sets the turn, context and page
        budgets; explicit arguments override it. `on_event` gets one line per model turn (progress
        for long sessions: a small local model takes minutes per proposal)."""
        self.on_event = on_event or (lambda line: None)
        self.model = get_model(model, base_url=base_url) if isinstance(model, str) else model
        p = PROFILES[profile] if isinstance(profile, str) else profile or profile_for(self.model.name)
        p = replace(p, **{k: v for k, v in (("max_turns", max_turns), ("max_tokens", max_tokens),
                                             ("max_context_chars", max_context_chars)) if v is not None})
        self.profile = p
        self.settings = ModelSettings(model=self.model.name, max_tokens=p.max_tokens, reasoning_effort=reasoning_effort,
                                      temperature=temperature if temperature is not None else
                                      (0.0 if p.name == "compact" else None))
        self.max_turns, self.max_context_chars = p.max_turns, p.max_context_chars
        self.spent_usd = 0.0  # across every propose() call, including those that returned None
        self.last_run: dict[str, Any] = {}  # turns, usd, unpriced calls, outcome, messages, trace_id of the last one

    # -- the loop ------------------------------------------------------------------------------------
    def propose(self, parent: Harness, evidence: Evidence, tried: set[str]) -> Revision | None:
        if not evidence.trial_ids:
            self.last_run = {"turns": 0, "usd": 0.0, "unpriced_calls": 0, "outcome": "no evidence", "trace_id": None}
            return None
        tracing = evidence.tracing
        if tracing is None:
            return self._run(parent, evidence, tried, self.model, None, lambda call, run: run())
        from metaopt.traces.instrument import TracedModel, tool_span  # traces sits below meta_agent: no cycle

        def wrap(call: ToolCallPart, run: Callable[[], ToolResultPart]) -> ToolResultPart:
            with tool_span(tracing.tracer, call.name, call.id, call.arguments) as span:
                part = run()
                span.set_result(part.response, is_error=part.is_error)
            return part

        with tracing.episode(agent_name="meta-agent", harness_version=None, conversation_id=uuid.uuid4().hex,
                             run_id=f"{evidence.experiment_id}:proposals", trial_id=None, task_id=None,
                             provider=self.model.provider, description=f"proposal for {evidence.parent_id or parent.name}"
                             ) as episode:
            episode.span.set_attributes({"metaopt.experiment.id": evidence.experiment_id,
                                         "metaopt.parent.id": evidence.parent_id or "",
                                         "metaopt.meta.profile": self.profile.name})
            rev = self._run(parent, evidence, tried, TracedModel(self.model, tracing.tracer), episode.trace_id, wrap)
            run = self.last_run
            episode.finish(run["usage"], run["outcome"], cost_usd=run["usd"])
        return rev

    def _run(self, parent: Harness, evidence: Evidence, tried: set[str], model: Model, trace_id: str | None,
             wrap: Wrap) -> Revision | None:
        p = self.profile
        say = evidence.on_event or self.on_event
        session = Session(parent, evidence, tried, p, trace_id=trace_id)
        tools = all_tools = tools_for(p)
        messages = [Message.system(system_prompt(p)), Message.user(guided(session.briefing(), evidence.guidance))]
        usd, unpriced, outcome, usage, nudges, loops, cuts = 0.0, 0, "max_turns", Usage(), 0, 0, 0
        refusal: str | None = None  # what write_revision last said of the current draft
        claim: dict[str, Any] = {}  # the arguments of the model's last write_revision call
        done: dict[str, str] = {}  # call signature -> what it returned the first time
        settings = self.settings
        t0 = time.monotonic()
        for turn in range(1, self.max_turns + 1):
            messages = fit_window(messages, tools, settings.max_tokens, self.model, self.max_context_chars)
            try:
                resp = model.generate(messages, tools, settings)
            except ModelError as e:  # the window is full all the same: end here, the draft is submitted below
                if e.error_type != CONTEXT_OVERFLOW or turn == 1:
                    raise
                say(f"meta-agent turn {turn}/{self.max_turns}: {e}")
                outcome, turn = CONTEXT_FULL, turn - 1  # this turn made no call
                break
            called = ", ".join(c.name for c in resp.message.tool_calls) or "no tool call"
            called += f", cut off at {settings.max_tokens} tokens" if resp.finish_reason == "length" else ""
            say(f"meta-agent turn {turn}/{self.max_turns}: {called} ({time.monotonic() - t0:.0f} s, "
                          f"{resp.usage.input_tokens} tokens in, {resp.usage.output_tokens} out)")
            usd += resp.cost_usd or 0.0
            unpriced += resp.cost_usd is None
            usage = usage + resp.usage
            calls = resp.message.tool_calls
            left = self.max_turns - turn
            if resp.finish_reason == "length" and any(c.arguments_error for c in calls) and left > 0:
                # cut off mid-call: nothing of it runs, and the partial reply is not kept (a small model
                # copies it); the next call gets twice the room, and a second cut samples instead of argmax
                cuts += 1
                name = next((c.name for c in calls if c.name != INVALID), "a tool")
                room = min(settings.max_tokens * 2, p.max_tokens * MAX_ROOM)
                messages.append(Message.user(CUT_OFF.format(n=settings.max_tokens, name=name, room=room)))
                settings = settings.model_copy(update={"max_tokens": room, **(
                    {"temperature": RESAMPLE_TEMPERATURE} if cuts >= 2 and p.name == "compact" else {})})
                messages = fit(messages, self.max_context_chars)
                continue
            reply, dropped = first_calls(resp.message, p.max_calls)
            calls = reply.tool_calls
            messages.append(reply)
            if not calls:
                if p.name == "compact" and nudges < 2 and left > 0:  # small models often just talk
                    nudges += 1
                    messages.append(Message.user(NUDGE))
                    continue
                outcome = "stopped without a revision"
                break
            claim = next((dict(c.arguments) for c in reversed(calls) if c.name in SUBMIT), claim)
            keys = {id(c): _signature(c, session) for c in calls}
            repeats = [c for c in calls if keys[id(c)] in done and (c.name in ONCE or p.name == "compact")]
            offered = [t.name for t in tools]
            withheld = set(p.tools) - set(offered) - EDIT_TOOLS - SUBMIT  # readers left out after a loop: not run

            results = [wrap(c, partial(_answer, c, session, done, keys[id(c)], c in repeats, withheld, offered))
                       for c in calls]
            edited = any(c.name in EDIT_TOOLS and not r.is_error and c not in repeats for c, r in zip(calls, results))
            for c, r in zip(calls, results):  # the draft's last refusal, kept until a new edit lands
                if c.name in SUBMIT and r.is_error:
                    refusal = r.response
                elif edited:
                    refusal = None
            if len(tools) < len(all_tools) and edited and not any(t.name in SUBMIT for t in tools):
                tools = all_tools  # the edit it was pushed to make is made: everything is offered again
            if session.revision is not None:
                outcome = "revision"
                break
            if dropped:
                _tell(results, f"only the first {len(calls)} calls of your reply ran; {dropped} more were dropped")
            if 0 < left <= 3:  # a session that ends unwritten is wasted
                _tell(results, f"{left} turn(s) left: call write_revision before they run out")
            messages.append(Message(role="tool", parts=[*results]))
            if len(repeats) == len(calls):  # a loop (small models at temperature 0): change the context
                loops += 1
                told, offer = _after_loop(session, refusal)
                messages.append(Message.user(told))
                tools = [t for t in all_tools if t.name in offer]
                if loops >= 2 and p.name == "compact":  # still looping: sample instead of argmax
                    settings = settings.model_copy(update={"temperature": RESAMPLE_TEMPERATURE})
            messages = fit(messages, self.max_context_chars)
        if session.revision is None and session.draft.changed and _submit_draft(session, claim, wrap, turn):
            say(f"meta-agent: {outcome}: its draft ({'; '.join(session.draft.log)}) was submitted as it stood")
            outcome = DRAFT_AT_CAP if outcome != CONTEXT_FULL else f"{CONTEXT_FULL}, draft submitted"
        self.spent_usd += usd
        self.last_run = {"turns": turn, "usd": usd, "unpriced_calls": unpriced, "outcome": outcome,
                         "messages": messages, "usage": usage, "trace_id": trace_id, "profile": p.name}
        rev = session.revision
        if rev is None:
            return None
        note = f" [meta-agent: {unpriced} model call(s) of unknown price counted as $0]" if unpriced else ""
        return replace(rev, rationale=rev.rationale + note, usd=usd, trace_id=trace_id)

    def opening(self, parent: Harness, evidence: Evidence) -> str:
        """The first user message a proposal session from `parent` would send (the bilevel ladder checks
        that a mechanism's guidance reaches it)."""
        return guided(Session(parent, evidence, set(), self.profile).briefing(), evidence.guidance)


EDIT_TOOLS, SUBMIT = {"set_field", "edit_prompt", "set_tool", "remove_tool"}, {"write_revision"}
ONCE = EDIT_TOOLS | SUBMIT | {"add_note"}  # never twice alike
LOOPING = ("Every call you made this turn repeats an earlier one, so none ran again. Your draft so far: {draft}. "
           "If it is what you want, call write_revision now (rationale, cause, fixes, keeps, note); otherwise "
           "make a different change.")
LOOPING_EMPTY = ("Every call you made this turn repeats an earlier one, so none ran again. Your draft has no edits "
                 "yet, so there is nothing to submit: change it now with an edit tool that addresses the signals. "
                 "{todo}")
LOOPING_REFUSED = ("Every call you made this turn repeats an earlier one, so none ran again. Your draft so far: "
                   "{draft}. write_revision refused it: {refusal}. Make a different change with an edit tool "
                   "(another value, another field or a prompt edit), then call write_revision.")
RESAMPLE_TEMPERATURE = 0.7
CUT_OFF = ("Your last reply was cut off at {n} output tokens in the middle of a {name} call, so it did not run "
           "and is not shown. Make the call again, shorter: one sentence each for rationale, cause and note, "
           "only task ids in fixes and keeps. You now have up to {room} tokens.")
MAX_ROOM = 4  # a cut-off call's retries get at most this many times the profile's max_tokens


DRAFT_AT_CAP = "draft at the turn cap"
CONTEXT_FULL = "context window full"  # the model's server refused the request: its draft is submitted as it stands
UNSTATED = "not stated: the meta-agent ended before write_revision; its draft was submitted as it stood"


def _submit_draft(session: Session, claim: dict[str, Any], wrap: Wrap, turn: int) -> bool:
    """Submit the draft of a session that ended without a revision (traced as a write_revision call):
    with the model's own last claim and note, else (or if that claim is refused) a claim that states no cause."""
    fallback = {"rationale": UNSTATED, "cause": UNSTATED, "fixes": list(session.failing_tasks), "keeps": []}
    mine = {k: claim[k] for k in ("rationale", "cause", "fixes", "keeps", "cites", "note") if k in claim}
    for args in ([{**fallback, **mine}] if mine else []) + [fallback]:
        call = ToolCallPart(id=f"draft-at-cap-{turn}", name="write_revision", arguments=args)
        wrap(call, partial(session.call, call))
        if session.revision is not None:
            return True
    return False


def _tell(results: list[ToolResultPart], note: str) -> None:
    """Say `note` at the end of the turn's last tool result, in brackets."""
    results[-1] = results[-1].model_copy(update={"response": f"{results[-1].response}\n\n[{note}]"})


def _after_loop(session: Session, refusal: str | None) -> tuple[str, set[str]]:
    """What a looping session is told and offered: only what is left to do (submit a draft with
    edits; edit an empty draft or one write_revision refused)."""
    draft = "; ".join(session.draft.log)
    if not session.draft.changed:
        calls, _ = failures.suggested_calls(session.parent, session.evidence, session.tried)
        todo = (f"They point at {'; '.join(map(failures.as_call, calls))}." if calls else
                f"They name no edit, so edit_prompt or set_tool. {session.signals()}")
        return LOOPING_EMPTY.format(todo=todo), EDIT_TOOLS
    if refusal is not None:
        return LOOPING_REFUSED.format(draft=draft, refusal=refusal), EDIT_TOOLS
    return LOOPING.format(draft=draft), SUBMIT


def _signature(call: ToolCallPart, session: Session) -> str:
    """A call's identity for repeat detection; a submission's includes the draft it would submit."""
    draft = "|" + "; ".join(session.draft.log) if call.name in SUBMIT else ""
    return call.name + json.dumps(call.arguments, sort_keys=True, default=str) + draft


def _answer(call: ToolCallPart, session: Session, done: dict[str, str], key: str, repeat: bool,
            withheld: set[str], offered: list[str]) -> ToolResultPart:
    """One call's result: a withheld tool is not run, a repeat gets what it returned before."""
    if call.name in withheld:
        return _withheld(call, offered)
    return _again(key, call, done) if repeat else _first(call, session, done)


def _first(call: ToolCallPart, session: Session, done: dict[str, str]) -> ToolResultPart:
    key = _signature(call, session)  # before the call: it may edit the draft
    part = session.call(call)
    done.setdefault(key, part.response)
    return part


def _withheld(call: ToolCallPart, offered: list[str]) -> ToolResultPart:
    return ToolResultPart(id=call.id, response=f"not run: {call.name} is not offered now; call one of: "
                                               f"{', '.join(offered)}", is_error=True)


def _again(key: str, call: ToolCallPart, done: dict[str, str]) -> ToolResultPart:
    before = done[key]
    before = before if len(before) <= 300 else before[:300] + " ..."
    return ToolResultPart(id=call.id, response=f"not run again: you made exactly this call before; it returned: "
                                               f"{before}", is_error=True)


def guided(briefing: str, guidance: str | None) -> str:
    """The briefing, then the bilevel outer loop's search guidance, if any."""
    return briefing + ("\n\n## Search guidance (from the optimizer's outer loop)\n" + guidance if guidance else "")


def system_prompt(profile: Profile | None = None) -> str:
    if profile is not None and profile.name == "compact":  # a small model: the short prompt, no reference
        return COMPACT_PROMPT.read_text(encoding="utf-8").strip()
    return (PROMPT.read_text(encoding="utf-8").strip() + "\n\n## Harness format (schema_version 1)\n\n"
            + format_reference())


def format_reference() -> str:
    """Every harness field with its type and docstring, generated from task_agent.harness."""
    lines: list[str] = []
    seen: set[type] = set()

    def walk(model: type[BaseModel], prefix: str) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, f in model.model_fields.items():
            ann = f.annotation
            doc = " ".join((f.description or "").split())
            lines.append(f"- `{prefix}{name}`: {_type_name(ann)}" + (f" — {doc}" if doc else ""))
            inner = _model_in(ann)
            if inner is not None:
                origin = typing.get_origin(_unwrap(ann))
                walk(inner, f"{prefix}{name}" + {list: "[].", dict: ".<name>."}.get(origin, "."))

    walk(Harness, "")
    return "\n".join(lines)


def _unwrap(ann: Any) -> Any:
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        return args[0] if len(args) == 1 else ann
    return ann


def _model_in(ann: Any) -> type[BaseModel] | None:
    ann = _unwrap(ann)
    if typing.get_origin(ann) in (list, dict):
        ann = _unwrap(typing.get_args(ann)[-1])
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def _type_name(ann: Any) -> str:
    text = getattr(ann, "__name__", None) if isinstance(ann, type) else None
    text = text or str(ann).replace("typing.", "").replace("task_agent.harness.", "")
    return re.sub(r"Annotated\[str, StringConstraints\([^)]*\)\]", "name ([a-zA-Z0-9_-]{1,64})", text)
