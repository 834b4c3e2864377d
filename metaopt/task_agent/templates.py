"""Shell templates and tool parameter schemas, as a harness declares them (task_agent.harness
validates with these; task_agent.tools renders and runs what they accept).

    parse_template(template)                  literal strings and `(param, raw)` placeholders
    check_parameters_schema(schema)           an object schema with identifier property names
    check_template(template, parameters)      the template parses and names declared parameters
"""

from __future__ import annotations

import re
from typing import Any

JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(!raw)?\}|[{}]")


def parse_template(template: str) -> list[str | tuple[str, bool]]:
    """Split a shell template into literal strings and `(param, raw)` placeholders: `{name}` is
    the shell-quoted value, `{name!raw}` the value as is, `{{`/`}}` literal braces (so `${HOME}`
    is written `${{HOME}}`). Raises ValueError on any other brace."""
    parts: list[str | tuple[str, bool]] = []
    pos = 0
    for m in _TOKEN.finditer(template):
        parts.append(template[pos : m.start()])
        if m.group(1):
            parts.append((m.group(1), bool(m.group(2))))
        elif m.group(0) in ("{{", "}}"):
            parts.append(m.group(0)[0])
        else:
            raise ValueError(f"lone {m.group(0)!r} at offset {m.start()}: write {{{{ or }}}} for a "
                             f"literal brace, {{name}} or {{name!raw}} for a parameter")
        pos = m.end()
    parts.append(template[pos:])
    return [p for p in parts if p != ""]


def check_parameters_schema(schema: dict[str, Any]) -> None:
    """Raise ValueError unless `schema` is an object schema whose property names are identifiers
    (they double as template placeholders), whose property types are JSON types and whose
    `required` names declared properties."""
    if schema.get("type") != "object":
        raise ValueError("must be a JSON schema with type: object")
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise ValueError("properties must be a mapping of name -> JSON schema")  # noqa: TRY004 - malformed input data: callers catch ValueError
    for key, sub in props.items():
        if not _IDENT.fullmatch(key):
            raise ValueError(f"property name {key!r} must match [A-Za-z_][A-Za-z0-9_]*")
        if not isinstance(sub, dict):
            raise ValueError(f"properties.{key} must be a JSON schema mapping")  # noqa: TRY004 - malformed input data: callers catch ValueError
        types = sub.get("type", [])
        types = types if isinstance(types, list) else [types]
        if bad := [t for t in types if t not in JSON_TYPES]:
            raise ValueError(f"properties.{key}.type: {bad[0]!r} is not one of "
                             f"{', '.join(JSON_TYPES)}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ValueError("required must be a list of property names")
    if unknown := [r for r in required if r not in props]:
        raise ValueError(f"required names undeclared properties: {', '.join(unknown)}")


def check_template(template: str, parameters: dict[str, Any]) -> None:
    """Raise ValueError unless `template` parses and names only declared parameters."""
    holes = [p[0] for p in parse_template(template) if isinstance(p, tuple)]
    declared = parameters.get("properties", {})
    if missing := [h for h in holes if h not in declared]:
        raise ValueError(f"placeholder {{{missing[0]}}} is not a parameter (declared: "
                         f"{', '.join(declared) or 'none'}); "
                         f"write {{{{ and }}}} for literal braces")
