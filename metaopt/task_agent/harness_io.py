"""Reading and writing harness folders (see task_agent.harness for the format).

`load_harness` reads a folder (inlining prompt files), `harness_from_data` validates parsed YAML
(`Harness.save`, in task_agent.harness, writes the canonical layout back), and `format_validation_error` turns a pydantic
error into the one-line `<field path>: <problem>` that HarnessError carries.
"""

from __future__ import annotations

import copy
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from metaopt.core.errors import HarnessError
from metaopt.task_agent.harness import SCHEMA_VERSION, Harness

# Where prompt values (text or {file: PATH}) may appear in the raw YAML.
_PROMPT_PATHS = [("prompts", "system"), ("prompts", "roles", "*"), ("prompts", "task_template"),
                 ("routing", "verification", "prompt")]


SHIPPED = Path(__file__).resolve().parents[1] / "harnesses"


def resolve_harness(ref: str | Path) -> Path:
    """A harness folder path, or the name of a shipped harness (`baseline`, `minimal`)."""
    path = Path(ref)
    if path.exists() or "/" in str(ref):
        return path
    if (SHIPPED / str(ref) / "harness.yaml").is_file():
        return SHIPPED / str(ref)
    known = sorted(p.name for p in SHIPPED.iterdir() if (p / "harness.yaml").is_file())
    raise HarnessError(f"{ref}: no such harness folder (shipped harnesses: {', '.join(known)})")


def load_harness(path: Path) -> Harness:
    """Load the harness folder `path` (or its harness.yaml). Raises HarnessError, one line
    `<file>: <field path>: <problem>`, for anything missing, unreadable or invalid."""
    path = Path(path)
    folder = path.parent if path.name == "harness.yaml" else path
    yaml_path = folder / "harness.yaml"
    if not folder.is_dir():
        raise HarnessError(f"{folder}: no such harness folder")
    if not yaml_path.is_file():
        raise HarnessError(f"{yaml_path}: missing (a harness folder holds harness.yaml and "
                           f"prompts/*.md)")
    try:
        raw = yaml.safe_load(yaml_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(e, "problem", None) or e
        raise HarnessError(f"{yaml_path}: invalid YAML{at}: {problem}") from None
    try:
        return harness_from_data(raw, folder)
    except HarnessError as e:
        raise HarnessError(f"{yaml_path}: {e}") from None


def harness_from_data(raw: Any, folder: Path | None = None) -> Harness:
    """Validate parsed YAML. `{file: PATH}` prompts are read relative to `folder` (None: file
    references are an error). Raises HarnessError `<field path>: <problem>`."""
    if not isinstance(raw, dict):
        raise HarnessError(f"expected a mapping at the top level, got {type(raw).__name__}")
    raw = copy.deepcopy(raw)  # prompt files are inlined into it; the caller's data stays as is
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        got = "missing" if version is None else f"{version!r} is not supported"
        raise HarnessError(f"schema_version: {got} (this metaopt reads harness "
                           f"schema_version {SCHEMA_VERSION})")
    for path in _PROMPT_PATHS:
        for loc, value, parent, key in _walk(raw, path):
            parent[key] = _read_prompt(value, loc, folder)
    try:
        return Harness.model_validate(raw)
    except ValidationError as e:
        raise HarnessError(format_validation_error(e)) from None


def _walk(node: Any, path: tuple[str, ...], loc: str = "") -> Any:
    """Yield (loc, value, parent, key) for every value at `path` ('*' = each key) in raw YAML."""
    if not path or not isinstance(node, dict):
        return
    keys = list(node) if path[0] == "*" else [path[0]] if path[0] in node else []
    for k in keys:
        here = f"{loc}.{k}" if loc else str(k)
        if len(path) == 1:
            yield here, node[k], node, k
        else:
            yield from _walk(node[k], path[1:], here)


def _read_prompt(value: Any, loc: str, folder: Path | None) -> Any:
    if not isinstance(value, dict):
        return value  # inline text; a wrong type is reported by validation
    if set(value) != {"file"} or not isinstance(value["file"], str):
        raise HarnessError(f"{loc}: a prompt is inline text or {{file: PATH}}, "
                           f"got keys {sorted(value)}")
    if folder is None:
        raise HarnessError(f"{loc}: file references need a harness folder")
    target = (folder / value["file"]).resolve()
    if not target.is_relative_to(folder.resolve()):
        raise HarnessError(f"{loc}: {value['file']} is outside the harness folder")
    shown = folder / value["file"]
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HarnessError(f"{loc}: prompt file {shown} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise HarnessError(f"{loc}: cannot read prompt file {shown}: {e}") from None
    return text.removesuffix("\n")


def format_validation_error(e: ValidationError) -> str:
    """The first error as `field.path[1].x: message`, plus how many more there are."""
    errors = e.errors()
    first = errors[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".")
    if first["type"] == "extra_forbidden":
        known = _known_keys(first["loc"][:-1])
        msg = "unknown key" + (f" (known: {', '.join(known)})" if known else "")
    else:
        msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
    return f"{loc}: {msg}{more}" if loc else f"{msg}{more}"


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model at `loc` below Harness, for 'unknown key' hints ([] if unsure)."""
    ann: Any = Harness
    for part in loc:
        ann = _unwrap(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel) and part in ann.model_fields:
            ann = ann.model_fields[part].annotation
        elif typing.get_origin(ann) in (list, dict):
            ann = typing.get_args(ann)[-1]
        else:
            return []
    ann = _unwrap(ann)
    return list(ann.model_fields) if isinstance(ann, type) and issubclass(ann, BaseModel) else []


def _unwrap(ann: Any) -> Any:
    """`X | None` -> X."""
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(ann) if a is not type(None))
    return ann
