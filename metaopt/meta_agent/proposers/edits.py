"""Structured edits: change one part of a harness at a time instead of rewriting all of it.

    d = Draft(parent)
    d.set_field("routing.limits.max_turns", 16)
    d.edit_prompt("system", "Run long jobs in the background.", section="Long jobs")
    d.set_tool("grep", kind="shell", description="...", template="grep -rn {pattern} .", parameters={...})
    d.remove_tool("python")
    d.harness()   # the edited harness

Each edit is applied to a copy and validated as a whole harness; a failing edit raises EditError
(one line naming the field and the problem, the draft unchanged), so a model learns at once which
edit was wrong. A small model can then change one field without re-emitting the whole YAML.

Paths are dotted field names; a tool is addressed by its name (`tools.bash.timeout_s`), a role or
role prompt by its key (`routing.roles.main.max_turns`, `prompts.roles.checker`). A value of null
resets the field to its default. The `model` section is refused unless model changes are allowed.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from typing import Any

from metaopt.core.errors import EditError, HarnessError
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.harness_io import harness_from_data

TOOL_FIELDS = ("kind", "description", "parameters", "template", "script", "session", "timeout_s",
               "output_limit", "user", "role")


LIMITS = {"max_turns", "max_wall_s", "timeout_s", "output_limit", "max_tokens"}
LOWERED = (". Note: this lowers a limit. A lower limit fixes no failure that a limit caused; if the signals show "
           "this limit was hit, raise it instead (set_field again with a larger value).")


class Draft:
    def __init__(self, parent: Harness, *, allow_model_changes: bool = False):
        self.parent, self.allow_model_changes = parent, allow_model_changes
        self.data: dict[str, Any] = parent.model_dump(mode="json", exclude_defaults=True)
        self.data["schema_version"] = parent.schema_version
        self.log: list[str] = []

    @property
    def changed(self) -> bool:
        return bool(self.log)

    def harness(self) -> Harness:
        return harness_from_data(self.data)

    def _commit(self, data: dict[str, Any], what: str) -> str:
        if data == self.data:
            return f"unchanged: {what} (the draft already has it)"
        try:
            harness_from_data(data)
        except HarnessError as e:
            raise EditError(f"not applied: {e}") from None
        self.data = data
        self.log.append(what)
        return f"ok: {what} ({len(self.log)} edit(s) so far; write_revision without harness_yaml submits them)"

    # -- edits -------------------------------------------------------------------------------------
    def set_field(self, path: str, value: Any) -> str:
        try:
            return self._set_field(path, value)
        except EditError:  # small models wrap the value as set_field's own argument: {"value": X}
            if not (isinstance(value, dict) and set(value) == {"value"}):
                raise
            try:
                return self._set_field(path, value["value"])
            except EditError:
                pass
            raise

    def _set_field(self, path: str, value: Any) -> str:
        keys = _split(path)
        if keys[0] == "model" and not self.allow_model_changes:
            raise EditError("the model section is frozen in this experiment (model changes are not allowed)")
        if keys[0] in ("schema_version",):
            raise EditError("schema_version cannot change")
        data = copy.deepcopy(self.data)
        node, reference = data, Harness.model_validate(self.data).model_dump(mode="json")
        for i, key in enumerate(keys[:-1]):
            node, reference = _child(node, reference, key, ".".join(keys[:i + 1]))
        leaf = keys[-1]
        if isinstance(node, list):  # a whole named item: `tools.grep` = {...} or null to remove it
            return self._set_item(data, node, leaf, value, path)
        if isinstance(node, dict) and leaf not in node and isinstance(reference, dict) and reference \
                and leaf not in reference and not _free_keys(keys[:-1]):
            raise EditError(f"unknown field {path!r}; fields here: {', '.join(reference) or 'none'}")
        before = node.get(leaf) if isinstance(node, dict) else None
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
        done = self._commit(data, f"{path}: {_short(before)} -> {_short(value)}")
        lowered = (leaf in LIMITS and isinstance(before, int | float) and isinstance(value, int | float)
                   and not isinstance(value, bool) and value < before)
        return done + (LOWERED if lowered else "")

    def _set_item(self, data: dict[str, Any], items: list, name: str, value: Any, path: str) -> str:
        at = next((i for i, x in enumerate(items) if isinstance(x, dict) and name in (x.get("name"), str(i))), None)
        if value is None:
            if at is None:
                raise EditError(f"nothing to remove at {path!r}")
            del items[at]
            return self._commit(data, f"{path} removed")
        if not isinstance(value, dict):
            raise EditError(f"{path} takes an object (the whole item) or null")
        value = _schema(value)
        item = {"name": name, **value} if at is None else {**value, "name": value.get("name", items[at].get("name"))}
        if at is None:
            items.append(item)
        else:
            items[at] = item
        return self._commit(data, f"{path} {'added' if at is None else 'replaced'}")

    def edit_prompt(self, prompt: str, text: str, section: str | None = None, old: str | None = None) -> str:
        """Replace `old` by `text`; or set the body of markdown section `section` (appended as a new
        `## section` when absent); or append `text` as a new paragraph."""
        keys = _prompt_path(prompt)
        data = copy.deepcopy(self.data)
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        current = node.get(keys[-1])
        if current is None:
            current = Harness.model_validate(self.data).model_dump(mode="json")
            for k in keys:
                current = (current or {}).get(k) if isinstance(current, dict) else None
            current = current or ""
        if not isinstance(current, str):
            raise EditError(f"prompt {prompt!r} is not text")
        if old:
            n = current.count(old)
            if n != 1:
                raise EditError(f"old text occurs {n} times in prompt {prompt!r}; it must occur exactly once")
            new, what = current.replace(old, text), f"replaced {len(old)} characters of {prompt}"
        elif section:
            new, what = _set_section(current, section, text), f"section {section!r} of {prompt}"
        else:
            new, what = (current.rstrip() + "\n\n" + text.strip()).strip(), f"appended to {prompt}"
        node[keys[-1]] = new
        return self._commit(data, what)

    def set_tool(self, name: str, **fields: Any) -> str:
        if unknown := sorted(set(fields) - set(TOOL_FIELDS)):
            raise EditError(f"unknown tool field(s) {', '.join(unknown)}; tool fields: {', '.join(TOOL_FIELDS)}")
        data = copy.deepcopy(self.data)
        tools = data.setdefault("tools", [])
        fields = _schema({k: v for k, v in fields.items() if v is not None})
        for t in tools:
            if t.get("name") == name:
                t.update(fields)
                return self._commit(data, f"tool {name}: set {', '.join(fields) or 'nothing'}")
        tools.append({"name": name, **fields})
        return self._commit(data, f"tool {name} added")

    def remove_tool(self, name: str) -> str:
        data = copy.deepcopy(self.data)
        tools = data.get("tools", [])
        kept = [t for t in tools if t.get("name") != name]
        if len(kept) == len(tools):
            raise EditError(f"no tool {name!r} (tools: {', '.join(t['name'] for t in tools) or 'none'})")
        data["tools"] = kept
        return self._commit(data, f"tool {name} removed")


def unoffered(child: Harness, parent: Harness) -> str:
    """Why `child` does not work when it adds tools that no role offers (every call to them would be
    refused, so they change nothing), naming the edit that offers them; '' when there are none."""
    offered = {t.name for r in child.routing.roles for t in child.tools_for(r)} | {t.name for t in parent.tools}
    lost = [t.name for t in child.tools if t.name not in offered]
    if not lost:
        return ""
    role = child.routing.start_role
    names = json.dumps([*(child.routing.roles[role].tools or []), *lost])
    return (f"no role offers the added tool(s) {', '.join(lost)}, so the model cannot call them: add them to a role, "
            f"e.g. set_field(path=\"routing.roles.{role}.tools\", value={names})")


def _schema(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool whose `parameters` is a bare properties map ({"command": {"type": "string"}}, as small
    models write it) with the JSON schema that map means."""
    p = tool.get("parameters")
    if isinstance(p, dict) and p and "type" not in p and all(isinstance(v, dict) and "type" in v for v in p.values()):
        return {**tool, "parameters": {"type": "object", "properties": p, "required": list(p)}}
    return tool


def _split(path: Any) -> list[str]:
    if not isinstance(path, str) or not path.strip():
        raise EditError("path must be a dotted field name, e.g. routing.limits.max_turns")
    keys = [k for k in re.split(r"[.\[\]]+", path.strip()) if k]
    return keys or [path]


def _free_keys(parent: list[str]) -> bool:
    """Mappings whose keys are names, not fields (a new key is fine there)."""
    return parent in (["prompts", "roles"], ["routing", "roles"]) or (len(parent) >= 3 and parent[-1] == "properties")


def _child(node: Any, reference: Any, key: str, where: str) -> tuple[Any, Any]:
    if isinstance(node, list):  # a list of named items (tools): address by name or index
        for i, item in enumerate(node):
            if isinstance(item, dict) and (item.get("name") == key or key == str(i)):
                ref = next((r for r in reference if isinstance(r, dict) and r.get("name") == item.get("name")), {})
                return item, ref
        names = [str(x.get("name")) for x in node if isinstance(x, dict)]
        raise EditError(f"no item {key!r} in {where.rsplit('.', 1)[0]} (names: {', '.join(names) or 'none'})")
    if not isinstance(node, dict):
        raise EditError(f"{where} is not a mapping")
    ref = reference.get(key) if isinstance(reference, dict) else None
    if key not in node:
        if ref is None and not isinstance(reference, dict):
            raise EditError(f"unknown field {where!r}")
        if isinstance(reference, dict) and reference and key not in reference:
            raise EditError(f"unknown field {where!r}; fields here: {', '.join(reference) or 'none'}")
        node[key] = copy.deepcopy(ref) if isinstance(ref, (dict, list)) else {}
    return node[key], ref if ref is not None else {}


def _prompt_path(prompt: Any) -> list[str]:
    if not isinstance(prompt, str):
        raise EditError("prompt must be a string")
    p = prompt.strip().removeprefix("prompts.")
    if p in ("system", "task_template"):
        return ["prompts", p]
    if p in ("verification", "routing.verification", "routing.verification.prompt"):
        return ["routing", "verification", "prompt"]
    for prefix in ("roles.", "role:", "role "):
        if p.startswith(prefix) and p[len(prefix):]:
            return ["prompts", "roles", p[len(prefix):].strip()]
    raise EditError(f"unknown prompt {prompt!r}; prompts: system, task_template, verification, roles.NAME")


def _set_section(text: str, section: str, body: str) -> str:
    """`text` with the body of markdown heading `section` replaced (or the section appended)."""
    title = section.strip().lstrip("#").strip()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(#+)\s+(.*?)\s*$", line)
        if m and m.group(2).lower() == title.lower():
            level = len(m.group(1))
            end = next((j for j in range(i + 1, len(lines))
                        if (n := re.match(r"^(#+)\s", lines[j])) and len(n.group(1)) <= level), len(lines))
            return "\n".join(lines[:i + 1] + body.strip().splitlines() + ([""] if end < len(lines) else []) + lines[end:])
    return (text.rstrip() + f"\n\n## {title}\n" + body.strip()).strip()


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


WRITTEN_CALL = re.compile(r"""set_field\(\s*path\s*=\s*["']([^"']+)["']\s*,\s*value\s*=\s*(.+?)\s*\)\s*(?:\(|$)""", re.DOTALL)


def written_calls(texts: list[Any]) -> list[tuple[str, Any]]:
    """The set_field calls written out as text (small models copy a suggested call into a claim field
    such as `fixes` instead of making it), as (path, value); a value that is not a literal is skipped."""
    out = []
    for text in texts:
        m = WRITTEN_CALL.search(text) if isinstance(text, str) else None
        if m is None:
            continue
        raw = m.group(2)
        for parse in (ast.literal_eval, json.loads):
            try:
                out.append((m.group(1), parse(raw)))
                break
            except (ValueError, SyntaxError, TypeError):
                continue
    return out
