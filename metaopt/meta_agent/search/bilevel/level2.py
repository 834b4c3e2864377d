"""Level 2: the meta-model writes a new search mechanism, in ONE conversation of four steps over the
inner loop's real record (record.py) and the protocol's source:

  1 Explore    what slows this search down; 2-4 mechanisms, each tied to rows of the record
  2 Critique   how each could make the search worse; whether its output can reach this
               proposer; pick one
  3 Specify    the chosen one as ONE JSON object (MechanismSpec); one repair turn if it does not
               parse or validate, then the session ends as a spec_error: never a default spec
  4 Generate   the module, in one ```python block; the ladder's static steps run at once and a
               refusal gets one repair turn in the same conversation

Every turn is one message list growing in place: each step sees everything before it. The
session never raises for what the model does; a model API failure ends it as model_error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metaopt.meta_agent.search.bilevel.records import SessionOutcome
from metaopt.meta_agent.search.bilevel.static import Step
from metaopt.meta_agent.search.mechanisms import MECHANISMS, builtin_source, protocol_source
from metaopt.meta_agent.search.mechanisms.protocol import HOOKS, NAME, OPTIONAL, REQUIRED
from metaopt.task_agent.messages import Message, ModelSettings

if TYPE_CHECKING:
    from metaopt.task_agent.models.base import Model

SYSTEM = """You are Level 2 of a bilevel harness optimizer. The inner loop proposes revisions of an agent's
harness (prompts, tools, routing, limits) and a statistical gate keeps a revision only if the validation
score rose beyond noise. You do not edit harnesses. You write a search mechanism: one Python module,
against the protocol below, that the inner loop calls at fixed hooks to steer its search (which parent
to extend, what guidance the proposer gets, which proposals to drop before they cost trials).

Your module runs in a sandbox. Before it touches a live iteration it must compile, use only allowed
imports, survive every recorded candidate of this experiment fed through every hook, round-trip its
state, and show in a dry iteration that its output takes effect. Every function it defines must be
called through the hooks: a helper class nothing calls is refused. Then it is judged on search
progress (validation gain per trial) with it and without it, and rolled back if it does not help.
A hook that raises, times out or returns a wrong shape switches it off for the rest of the run.

This is one conversation in four steps: Explore, Critique, Specify, Generate. Ground every claim in
the record: cite candidate ids, gate reasons and hook calls.

## The protocol (meta_agent/search/mechanisms/protocol.py)

```python
{protocol}
```

## A built-in mechanism written against it (meta_agent/search/mechanisms/tabu.py)

```python
{example}
```"""

EXPLORE = """## The inner loop's record

{record}

## Step 1 of 4: Explore
What is slowing this search down, or wasting its trials? Propose 2 to 4 search mechanisms that would
address what you see, each tied to rows of the record. No code yet; at most 250 words."""

CRITIQUE = """## Step 2 of 4: Critique
For each mechanism you proposed: how could it make the search worse? What in the record supports or
contradicts it? Can its output reach this proposer ('{name}', takes text guidance: {takes}; can
change: {areas})? Choose one and say why, in at most 200 words."""

SPECIFY = """## Step 3 of 4: Specify
Specify the chosen mechanism as ONE JSON object and nothing else, with exactly these keys:
  "name": snake_case, matching {name_re}
  "idea": what it does, in a sentence or two
  "evidence": [the candidate ids / record rows that motivate it]
  "hooks": an object mapping each hook you implement to what it does; it must include {required};
           it may include {optional}
  "state": what state_dict() holds
  "expected_effect": what should improve in the record if it works, and how we would see it"""

GENERATE = """## Step 4 of 4: Generate
Write the module for the spec you gave: one ```python block and nothing else. It defines class
Mechanism with name = "{name}" and exactly the hooks of your spec ({hooks}), standard library only
(allowed imports: {allowed}), every function it defines called through those hooks."""

REPAIR_SPEC = "Your spec was refused: {error}\nReply with the corrected JSON object only."
REPAIR_CODE = "Your module was refused at the {step} step: {error}\nReply with the corrected module in one ```python block."


class MechanismSpec(BaseModel):
    """Step 3's object. Unknown keys are errors, as is any missing one."""

    model_config = ConfigDict(extra="forbid")
    name: str
    idea: str = Field(min_length=10)
    evidence: list[str] = Field(min_length=1)
    hooks: dict[str, str]
    state: str | dict[str, Any] = Field(min_length=1)
    """What state_dict() holds: words, or the state's shape as an object."""
    expected_effect: str = Field(min_length=5)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(f"must match {NAME.pattern}")
        if v in MECHANISMS:
            raise ValueError(f"'{v}' is a built-in mechanism's name: choose another")
        return v

    @field_validator("hooks")
    @classmethod
    def _hooks(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(v) - set(HOOKS))
        missing = [h for h in REQUIRED if h not in v]
        if unknown or missing:
            raise ValueError(f"unknown hooks {unknown}" if unknown else f"missing required hooks {missing}")
        return v


@dataclass
class Session:
    outcome: SessionOutcome
    messages: list[Message]
    spec: MechanismSpec | None = None
    source: str | None = None
    errors: list[str] = field(default_factory=list)
    attempts: list[tuple[str, list[Step]]] = field(default_factory=list)
    """Every module the session produced, with the static steps it got."""
    usd: float = 0.0

    def transcript(self) -> list[dict[str, str]]:
        return [{"role": m.role, "text": m.text} for m in self.messages]


def parse_spec(text: str) -> MechanismSpec:
    """The JSON object of `text` (bare, or in one ```json fence). Raises ValueError saying why."""
    body = _fenced(text, ("json", "")) or text.strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        raise ValueError(f"not a JSON object ({e.msg} at line {e.lineno} column {e.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"the spec must be a JSON object, got {type(data).__name__}")  # noqa: TRY004 - malformed input data: callers catch ValueError
    try:
        return MechanismSpec.model_validate(data)
    except ValidationError as e:
        raise ValueError("; ".join(f"{'.'.join(map(str, x['loc'])) or 'spec'}: {x['msg']}" for x in e.errors())) from None


def extract_code(text: str) -> str:
    """The module in one ```python block. Raises ValueError when there is none or several."""
    blocks = re.findall(r"```(?:python|py)[ \t]*\n(.*?)```", text, re.DOTALL)
    if len(blocks) != 1:
        raise ValueError(f"the reply must hold exactly one ```python block, it holds {len(blocks)}")
    return blocks[0].strip() + "\n"


def spec_mismatch(spec: MechanismSpec, steps: list[Step]) -> str | None:
    """Why the module does not implement its spec (name, optional hooks), or None."""
    parsed = next((s for s in steps if s.step == "parse" and s.ok), None)
    if parsed is None:
        return None
    name, hooks = parsed.detail["name"], set(parsed.detail["hooks"])
    if name != spec.name:
        return f"Mechanism.name is {name!r} but the spec names {spec.name!r}"
    want = {h for h in spec.hooks if h in OPTIONAL}
    have = hooks & set(OPTIONAL)
    if want != have:
        return f"the spec's optional hooks are {sorted(want)} but the module implements {sorted(have)}"
    return None


# Reply limits per step (tokens): prose steps short, the module long enough for a whole mechanism.
MAX_TOKENS = {"explore": 700, "critique": 600, "specify": 700, "generate": 2500}


def run_session(model: Model, record: str, proposer: dict[str, Any], static: Callable[[str], list[Step]],
                *, max_tokens: dict[str, int] | None = None) -> Session:
    """One Level-2 conversation; `static(source)` runs the ladder's static steps."""
    from metaopt.meta_agent.search.mechanisms.protocol import ALLOWED_IMPORTS

    limits = {**MAX_TOKENS, **(max_tokens or {})}
    s = Session("model_error", [Message.system(SYSTEM.replace("{protocol}", protocol_source().strip())
                                               .replace("{example}", builtin_source("tabu").strip()))])

    def ask(text: str, step: str) -> str:
        s.messages.append(Message.user(text))
        resp = model.generate(s.messages, [], ModelSettings(model=model.name, max_tokens=limits[step]))
        s.usd += resp.cost_usd or 0.0
        s.messages.append(resp.message)
        return resp.message.text

    try:
        ask(EXPLORE.format(record=record), "explore")
        ask(CRITIQUE.format(name=proposer["name"], takes=proposer["takes_guidance"], areas=", ".join(proposer["areas"])),
            "critique")
        reply = ask(SPECIFY.format(name_re=NAME.pattern, required=", ".join(REQUIRED), optional=", ".join(OPTIONAL)),
                    "specify")
        for turn in range(2):
            try:
                s.spec = parse_spec(reply)
                break
            except ValueError as e:
                s.errors.append(f"spec: {e}")
                if turn == 1:
                    s.outcome = "spec_error"
                    return s
                reply = ask(REPAIR_SPEC.format(error=e), "specify")
        spec = s.spec
        assert spec is not None  # the loop above returns unless a spec parsed
        reply = ask(GENERATE.format(name=spec.name, hooks=", ".join(spec.hooks),
                                    allowed=", ".join(sorted(ALLOWED_IMPORTS - {"__future__"}))), "generate")
        for turn in range(2):
            try:
                source = extract_code(reply)
            except ValueError as e:
                step, problem = "generate", str(e)
            else:
                steps = static(source)
                s.attempts.append((source, steps))
                bad = next((x for x in steps if not x.ok), None)
                mismatch = spec_mismatch(spec, steps) if bad is None else None
                if bad is None and mismatch is None:
                    s.outcome, s.source = "module", source
                    return s
                step, problem = (bad.step, bad.reason) if bad else ("spec", mismatch)
            s.errors.append(f"{step}: {problem}")
            if turn == 1:
                s.outcome = "code_error"
                return s
            reply = ask(REPAIR_CODE.format(step=step, error=problem), "generate")
    except Exception as e:  # noqa: BLE001 - a failing meta-model ends the session, never the run
        s.errors.append(f"model: {type(e).__name__}: {e}")
        s.outcome = "model_error"
    return s


def _fenced(text: str, langs: tuple[str, ...]) -> str | None:
    for lang in langs:
        found = re.findall(rf"```{lang}[ \t]*\n(.*?)```", text, re.DOTALL)
        if len(found) == 1:
            return found[0].strip()
    return None
