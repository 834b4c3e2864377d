"""The harness format: the editable data that drives the task agent (schema version 1).

A harness is a folder: `harness.yaml` plus `prompts/*.md`. Wherever the YAML holds a prompt
(`prompts.system`, `prompts.roles.<name>`, `prompts.task_template`,
`routing.verification.prompt`) the value is either inline text or a one-key mapping
`{file: PATH}`, PATH relative to the harness folder and inside it. A prompt file's text is the
prompt minus one trailing newline (editors add one). `load_harness` inlines every file, so a
`Harness` in memory is self-contained; `Harness.save` writes the canonical layout back, so the
diff between two revisions is a diff between two folders. This module holds the models and the
writer; reading folders, and turning validation errors into one line, live in task_agent.harness_io.

Every model forbids unknown keys: the meta-agent rewrites harnesses as data, and a misspelt knob
must fail loudly instead of silently doing nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from metaopt.task_agent.messages import ModelSettings, ToolSpec
from metaopt.task_agent.templates import check_parameters_schema, check_template

SCHEMA_VERSION = 1
Name = Annotated[str, StringConstraints(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


_KIND_FIELDS = {"shell": {"template", "session"}, "python": {"script", "session"},
                "agent": {"role"}, "finish": set()}
_KIND_REQUIRES = {"shell": "template", "python": "script", "agent": "role"}


class ToolDef(_Strict):
    """One tool the model can call. Shell and python tools run in the sandbox
    (task_agent.tools.run_tool); finish and agent tools are handled by the agent loop."""

    name: Name
    """What the model calls; unique within the harness."""
    kind: Literal["shell", "python", "finish", "agent"]
    """shell: run `template`; python: run `script`; finish: end the episode; agent: a sub-agent."""
    description: str
    """Shown to the model: what the tool does and when to use it."""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON schema (type: object) of the arguments; property names are identifiers."""
    template: str | None = None
    """shell only: the command; `{p}` inserts argument p shell-quoted, `{p!raw}` inserts it raw,
    `{{`/`}}` are literal braces. Absent optional arguments use the schema default, else ''."""
    session: Literal["persistent", "fresh"] = "persistent"
    """shell/python: run in the agent's persistent shell (cwd, env carry over) or a fresh exec."""
    script: str | None = None
    """python only: source run in the sandbox with python3; arguments arrive as one JSON object
    on stdin; stdout is the result; a non-zero exit marks the result as an error."""
    role: str | None = None
    """agent only: the routing role the sub-agent runs."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Seconds before the command is killed (bounded further by the task's time left)."""
    output_limit: int = Field(default=10_000, ge=0)
    """Most characters of output the model sees; the rest is cut from the middle (head+tail)."""
    user: str | None = None
    """User for fresh execs; None = the sandbox default (persistent tools: the shell's user)."""

    @model_validator(mode="after")
    def _kind_fields(self) -> ToolDef:
        needed = _KIND_REQUIRES.get(self.kind)
        if needed and getattr(self, needed) is None:
            raise ValueError(f"{needed} is required for {self.kind} tools")
        # session at its default is allowed everywhere, so a full model_dump() validates again
        given = {f for f in ("template", "script", "role", "session")
                 if f in self.model_fields_set and getattr(self, f) is not None
                 and not (f == "session" and self.session == "persistent")}
        if stray := sorted(given - _KIND_FIELDS[self.kind]):
            raise ValueError(f"{', '.join(stray)} does not apply to {self.kind} tools")
        field = "parameters"
        try:
            check_parameters_schema(self.parameters)
            field = "template"
            if self.template is not None:
                check_template(self.template, self.parameters)
            field = "script"
            if self.script is not None:  # a broken script fails here, before budget is spent
                compile(self.script, f"<tool {self.name}>", "exec")
        except SyntaxError as e:
            raise ValueError(f"script: line {e.lineno}: {e.msg}") from None
        except ValueError as e:
            raise ValueError(f"{field}: {e}") from None
        return self


class Prompts(_Strict):
    system: str = ""
    """The system prompt of every role."""
    roles: dict[Name, str] = Field(default_factory=dict)
    """Per-role prompts, appended to the system prompt for roles that name them."""
    task_template: str = "{instruction}"
    """The first user message: `{instruction}` becomes the task text (no other placeholders)."""

    @model_validator(mode="after")
    def _has_instruction(self) -> Prompts:
        if "{instruction}" not in self.task_template:
            raise ValueError("task_template: must contain {instruction}")
        return self


class RoleDef(_Strict):
    prompt: str | None = None
    """Key into prompts.roles; None = the system prompt alone."""
    tools: list[str] | None = None
    """Names of the tools this role may call; None = every tool."""
    max_turns: int | None = Field(default=None, gt=0)
    """Model turns for this role; None = routing.limits.max_turns."""


class Verification(_Strict):
    prompt: str
    """Sent as a user message the first time the model calls finish, asking it to verify."""
    max_rounds: int = Field(default=1, ge=1)
    """How many times finish is challenged before it is accepted."""


class Limits(_Strict):
    max_turns: int = Field(default=50, gt=0)
    """Model turns per episode (the start role)."""
    max_wall_s: float | None = Field(default=None, gt=0)
    """Wall-clock limit of the episode; None = the task's agent timeout."""


class Context(_Strict):
    max_tokens: int | None = Field(default=None, gt=0)
    """Context budget in tokens, counted by the model's own tokenizer where it has one (local/
    models), else approximated as characters / 4; None = no budget. Whatever it says, a model that
    knows its context window (local/ models) also gets each request trimmed to that window, less
    room for the reply (its max_tokens, at most a quarter of the window)."""
    on_overflow: Literal["truncate_oldest_tool_outputs", "summarize", "stop"] = (
        "truncate_oldest_tool_outputs")
    """What the loop does when the history exceeds max_tokens or the model's window; when even
    that leaves it too big, the episode ends as context_limit (the agent's failure)."""


class Routing(_Strict):
    start_role: str = "main"
    """The role that receives the task."""
    roles: dict[Name, RoleDef] = Field(default_factory=lambda: {"main": RoleDef()})
    """Roles by name; agent tools run them as sub-agents."""
    verification: Verification | None = None
    """Optional verification phase before finish is accepted."""
    limits: Limits = Field(default_factory=Limits)
    """Turn and time limits."""
    context: Context = Field(default_factory=Context)
    """Context-window management."""


class ModelSection(_Strict):
    """Model knobs: kept apart because the optimizer leaves them frozen unless told otherwise."""

    model: str | None = None
    """`provider/model`; None = the model given on the command line."""
    temperature: float | None = None
    """None = the provider's default."""
    reasoning_effort: Literal["low", "medium", "high"] | None = None
    """See ModelSettings.reasoning_effort."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Output tokens per call; None = ModelSettings' default."""
    thinking_budget: int | None = Field(default=None, gt=0)
    """Anthropic thinking budget; see ModelSettings.thinking_budget."""


class Harness(_Strict):
    """A complete, self-contained harness (prompt files already inlined)."""

    schema_version: Literal[1]
    """Format version; bumped (with a migration) whenever the format changes incompatibly."""
    name: str = Field(min_length=1)
    """Short name, e.g. `baseline`."""
    description: str = ""
    """What this harness is for / how it differs from its parent."""
    prompts: Prompts = Field(default_factory=Prompts)
    """System, role and task prompts."""
    tools: list[ToolDef] = Field(default_factory=list)
    """Tools, in the order the model sees them."""
    routing: Routing = Field(default_factory=Routing)
    """Roles, verification, limits, context management."""
    model: ModelSection = Field(default_factory=ModelSection)
    """Model knobs."""

    @model_validator(mode="after")
    def _references(self) -> Harness:
        problems: list[str] = []
        seen: dict[str, int] = {}
        for i, t in enumerate(self.tools):
            if t.name in seen:
                problems.append(f"tools[{i}].name: duplicate tool name {t.name!r} "
                                f"(also tools[{seen[t.name]}])")
            seen.setdefault(t.name, i)
            if t.kind == "agent" and t.role not in self.routing.roles:
                problems.append(f"tools[{i}].role: unknown role {t.role!r} "
                                f"(roles: {', '.join(self.routing.roles)})")
        if sum(t.kind == "finish" for t in self.tools) > 1:
            problems.append("tools: at most one finish tool")
        if self.routing.start_role not in self.routing.roles:
            problems.append(f"routing.start_role: unknown role {self.routing.start_role!r} "
                            f"(roles: {', '.join(self.routing.roles) or 'none'})")
        for rname, role in self.routing.roles.items():
            if role.prompt is not None and role.prompt not in self.prompts.roles:
                problems.append(f"routing.roles.{rname}.prompt: no prompts.roles.{role.prompt}")
            for j, tname in enumerate(role.tools or []):
                if tname not in seen:
                    problems.append(f"routing.roles.{rname}.tools[{j}]: unknown tool {tname!r} "
                                    f"(tools: {', '.join(seen) or 'none'})")
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise ValueError(problems[0] + more)
        return self

    def content_hash(self) -> str:
        """sha256 (hex) of the canonical JSON of every field (defaults, name and description
        included): equal harnesses hash the same whatever their YAML layout or prompt files."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False,
                               separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def tools_for(self, role: str) -> list[ToolDef]:
        """The tools `role` may call, in harness order. KeyError for an unknown role."""
        allowed = self.routing.roles[role].tools
        return [t for t in self.tools if allowed is None or t.name in allowed]

    def tool_specs(self, role: str) -> list[ToolSpec]:
        """What the model is offered when running `role`."""
        return [ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
                for t in self.tools_for(role)]

    def system_prompt(self, role: str) -> str:
        """The system prompt, then the role's prompt (if any) after a blank line."""
        key = self.routing.roles[role].prompt
        return "\n\n".join(p for p in (self.prompts.system, self.prompts.roles.get(key or "")) if p)

    def render_task(self, instruction: str) -> str:
        """The first user message for a task."""
        return self.prompts.task_template.replace("{instruction}", instruction)

    def model_settings(self, default_model: str | None) -> ModelSettings:
        """Settings for generate(): the harness's model, else `default_model`. ValueError if
        neither names one."""
        m = self.model
        model = m.model or default_model
        if not model:
            raise ValueError(f"harness {self.name!r} names no model and none was given")
        extra = {} if m.max_tokens is None else {"max_tokens": m.max_tokens}
        return ModelSettings(model=model, temperature=m.temperature,
                             reasoning_effort=m.reasoning_effort,
                             thinking_budget=m.thinking_budget, **extra)

    def save(self, folder: Path) -> None:
        """Write harness.yaml and prompts/*.md into `folder` (created if missing): the system
        prompt goes to prompts/system.md, role prompts to prompts/role-<name>.md, the
        verification prompt to prompts/verification.md, a multi-line task template to
        prompts/task_template.md; everything else stays inline, and fields equal to their default
        are left out, so equal harnesses save to identical folders. Other *.md files in prompts/
        are removed: the folder mirrors this harness exactly."""
        save_harness(self, folder)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as `|` blocks, so scripts and templates diff line by line."""


_Dumper.add_representer(str, lambda d, s: d.represent_scalar(
    "tag:yaml.org,2002:str", s, style="|" if "\n" in s else None))
# 120.0 -> 120: float fields load ints back unchanged, and hand-written YAML uses ints.
_Dumper.add_representer(float, lambda d, f: d.represent_int(int(f)) if f.is_integer()
                        else yaml.SafeDumper.represent_float(d, f))


def save_harness(harness: Harness, folder: Path) -> None:
    """Write `harness` into `folder` in the canonical layout; see Harness.save."""
    folder = Path(folder)
    data = harness.model_dump(mode="json", exclude_defaults=True)
    files: dict[str, str] = {"prompts/system.md": harness.prompts.system}
    prompts = data.setdefault("prompts", {})
    prompts["system"] = {"file": "prompts/system.md"}
    for rname, text in harness.prompts.roles.items():
        files[f"prompts/role-{rname}.md"] = text
        prompts.setdefault("roles", {})[rname] = {"file": f"prompts/role-{rname}.md"}
    if "\n" in harness.prompts.task_template:
        files["prompts/task_template.md"] = harness.prompts.task_template
        prompts["task_template"] = {"file": "prompts/task_template.md"}
    if harness.routing.verification is not None:
        files["prompts/verification.md"] = harness.routing.verification.prompt
        data["routing"]["verification"]["prompt"] = {"file": "prompts/verification.md"}
    (folder / "prompts").mkdir(parents=True, exist_ok=True)
    for stale in (folder / "prompts").glob("*.md"):
        if f"prompts/{stale.name}" not in files:
            stale.unlink()
    for rel, text in files.items():
        (folder / rel).write_text(text + "\n", encoding="utf-8")
    (folder / "harness.yaml").write_text(
        yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10_000),
        encoding="utf-8")
