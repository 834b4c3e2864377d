"""RunConfig: everything an experiment is started with. Stored in `experiments.config` and reused
as it was by `--resume`. The CLI's defaults are these fields' defaults (defined once, here).
Presets (`metaopt run -c preset.yaml -c key=value`) are these fields in YAML (load_presets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from metaopt.core.errors import UserError
from metaopt.meta_agent.search.bilevel.config import BilevelConfig
from metaopt.meta_agent.sequential import SequentialRule


class RunConfig(BaseModel):
    """One experiment's settings. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    benchmark: str
    """Benchmark name (`metaopt benchmarks list`)."""
    dataset: str | None = None
    """Task directory or dataset for benchmarks that need one."""
    tasks: list[str] | None = None
    """Only these task ids (then split as usual); None: every task of the benchmark."""
    model: str
    """The task model, provider/model (e.g. fake/solution, anthropic/claude-sonnet-4-5)."""
    meta_model: str = "heuristic"
    """heuristic (no model), or provider/model for the llm meta-agent (e.g. fake/script:PATH)."""
    strategy: str = "greedy"
    """Which candidate to extend next: greedy (the incumbent), pareto (per-task frontier, merges) or bilevel
    (an outer loop steering greedy/pareto with search mechanisms, some of them generated)."""
    trials: int = Field(default=3, ge=1)
    """Trials per task and candidate (K)."""
    seed: int = 0
    """Seed of the split, of the strategy's choices and of each candidate's draws in the staged gate
    (with its position: gate.seeded_by), so two runs with one seed decide alike."""
    split: tuple[float, float, float] = (0.5, 0.25, 0.25)
    """train, validation, test fractions."""
    budget_usd: float | None = Field(default=None, gt=0)
    """Stop when task + meta spend reach this (None: no money limit)."""
    max_trials: int | None = Field(default=None, ge=1)
    """Stop after this many trials (None: no limit)."""
    max_iterations: int = Field(default=10, ge=1)
    """Proposals at most."""
    time_limit_s: float | None = Field(default=None, gt=0)
    """Stop after this many seconds of wall time (None: no limit)."""
    target_score: float | None = None
    """Stop when the incumbent's validation score reaches it."""
    plateau: int = Field(default=3, ge=1)
    """Stop after this many proposals in a row without an accepted gain."""
    allow_model_changes: bool = False
    """Let revisions change the harness's model knobs (frozen by default)."""
    concurrency: int = Field(default=2, ge=1)
    """Trials running at once (per candidate being judged)."""
    parallel: int = Field(default=1, ge=1)
    """Candidates in flight at once (meta_agent.swarm): proposals overlap evaluations; 1: one
    candidate at a time, proposed, then judged."""
    base_url: str | None = None
    """Server for openai-compatible/ models (else OPENAI_BASE_URL)."""
    gpus: int | None = Field(default=None, ge=0)
    """GPUs per task container (`--gpus`); None: what each task asks."""
    executor: str = "local"
    """Where trials run: local (a thread pool here) or ray (Ray tasks on a cluster's nodes)."""
    ray_address: str | None = None
    """The Ray cluster for executor ray (the head's host:port); None: RAY_ADDRESS, else a new local Ray."""
    gate: SequentialRule = SequentialRule()
    """The staged gate's parameters (meta_agent.sequential): experiment-wise alpha, selection and
    confirmation settings."""
    reviewer: str | None = None
    """A model (provider/model) that reviews every candidate passing the guard's mechanical checks,
    before it spends trials, for content specific to a task (meta_agent.guard.reviewer); its
    verdict must cite a span of the added text. None: no review."""
    canary: bool = True
    """Add the experiment's canaries (copies of train tasks only tampering passes; benchmarks.canary) to every
    candidate's smoke run; a candidate that passes one, or has any `tampered` trial, is invalid."""

    @field_validator("gate", mode="before")
    @classmethod
    def _fixed_gate_settings(cls, v: Any) -> Any:
        """An experiment stored before the staged gate has the fixed gate's settings: keep what
        carries over (min_effect, min_coverage, min_tasks), drop its z."""
        if isinstance(v, dict) and "z" in v:
            return {k: x for k, x in v.items() if k in ("min_effect", "min_coverage", "min_tasks")}
        return v

    bilevel: BilevelConfig = BilevelConfig()
    """The bilevel strategy's settings (used with strategy bilevel only)."""


def default(field: str):
    """The default of RunConfig.`field` (the CLI uses it so that defaults live in one place)."""
    return RunConfig.model_fields[field].default


PRESET_ONLY = ("harness",)
"""Keys a preset may hold besides RunConfig's fields: the starting harness (`--harness`)."""


def load_presets(items: list[str]) -> dict[str, Any]:
    """`metaopt run -c ...` values merged in order, later ones winning (nested settings such as
    `gate` and `bilevel` merge key by key): a YAML file of RunConfig fields (and `harness`), or
    KEY=VALUE, the value read as YAML and a dotted key reaching into a nested setting
    (`gate.alpha=0.1`). Each is checked on its own: a bad one is one UserError naming the file or
    the key and the field."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if sep and key.strip() and "/" not in key and not Path(item).exists():
            source, data = "-c", _dotted(key.strip(), value)
        else:
            source, data = item, _preset_file(Path(item))
        _check(data, source)
        out = merged(out, data)
    return out


def _dotted(key: str, value: str) -> dict[str, Any]:
    try:
        data: Any = yaml.safe_load(value)
    except yaml.YAMLError:
        raise UserError(f"cannot read the value {value!r}", field="-c") from None
    for part in reversed(key.split(".")):
        data = {part: data}
    return data


def _preset_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UserError("no such preset file (a -c value is a YAML file or KEY=VALUE)", field=str(path)) from None
    except OSError as e:
        raise UserError(f"cannot read the preset: {e.strerror or e}", field=str(path)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise UserError(f"not YAML{where}: {getattr(e, 'problem', None) or e}", field=str(path)) from None
    if not isinstance(data, dict):
        raise UserError("a preset is a mapping of RunConfig fields (e.g. `trials: 2`)", field=str(path))
    return data


def _check(data: dict[str, Any], source: str) -> None:
    """`data`'s fields are RunConfig's, with valid values (the required ones stood in for)."""
    fields = {k: v for k, v in data.items() if k not in PRESET_ONLY}
    try:
        RunConfig.model_validate({"benchmark": "-", "model": "-", **fields})
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(map(str, first["loc"]))
        msg = "not a RunConfig field" if first["type"] == "extra_forbidden" else first["msg"]
        raise UserError(f"{loc}: {msg.removeprefix('Value error, ')}", field=source) from None
    for k in PRESET_ONLY:
        if k in data and not isinstance(data[k], str):
            raise UserError(f"{k}: expected a string", field=source)


def merged(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """`b` over `a`, nested mappings merged key by key."""
    out = dict(a)
    for k, v in b.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
