"""Harbor's task.toml schema (harbor 0.25.0, `harbor/models/task/config.py`), field by field.

Every table forbids keys it does not know: a key Harbor has and metaopt cannot honour is refused
by `harbor.load` naming it (never dropped while it changes what the task is or how it is scored),
and a key neither knows is a typo the author should hear about. Harbor's own validators that
decide what a task is are mirrored (artifact paths, allowlists, the verifier's mode); the rest of
what Harbor checks (registry names, credentials in MCP headers) is Harbor's business.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NetworkMode = Literal["public", "no-network", "allowlist"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Author(_Strict):
    name: str
    email: str | None = None


class PackageInfo(_Strict):
    """`[task]`: the registry identity (Terminal-Bench 2.1 and later)."""
    name: str
    version: str | None = None
    description: str = ""
    authors: list[Author] = []
    keywords: list[str] = []


class _Network(_Strict):
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None

    @model_validator(mode="after")
    def _hosts_need_allowlist(self) -> _Network:
        if self.allowed_hosts and self.network_mode != "allowlist":
            raise ValueError("allowed_hosts is only valid when network_mode = 'allowlist'")
        return self


class Healthcheck(_Strict):
    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


class MCPServer(_Strict):
    name: str
    transport: Literal["stdio", "sse", "streamable-http", "http"] = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = []
    headers: dict[str, str] = {}


class EnvironmentConfig(_Network):
    build_timeout_sec: float = 600.0
    docker_image: str | None = None
    os: Literal["linux", "windows", "Linux", "Windows", "LINUX", "WINDOWS"] = "linux"
    cpus: float | None = None
    memory_mb: int | None = None
    memory: str | None = None  # deprecated "2G"
    storage_mb: int | None = None
    storage: str | None = None  # deprecated
    gpus: int | None = None
    gpu_types: list[str] | None = None
    tpu: dict[str, Any] | None = None
    mcp_servers: list[MCPServer] = []
    env: dict[str, str] = {}
    skills_dir: str | None = None
    healthcheck: Healthcheck | None = None
    workdir: str | None = None
    allow_internet: bool | None = None  # deprecated


class Collect(_Strict):
    command: str
    service: str = "main"
    timeout_sec: float = 60.0
    user: str | int | None = None


class Artifact(_Strict):
    source: str
    destination: str | None = None
    exclude: list[str] = []
    service: str | None = None

    @field_validator("source")
    @classmethod
    def _no_parent(cls, value: str) -> str:
        if any(part == ".." for part in PurePosixPath(value).parts):
            raise ValueError(f"artifact source must not contain '..' components: {value!r}")
        return value

    @field_validator("destination")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value and (value.startswith("/") or ".." in PurePosixPath(value).parts or "\\" in value):
            raise ValueError(f"artifact destination must be a relative path without '..': {value!r}")
        return value or None


class VerifierConfig(_Network):
    timeout_sec: float = 600.0
    env: dict[str, str] = {}
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: EnvironmentConfig | None = None
    collect: list[Collect] = []

    @model_validator(mode="after")
    def _mode_and_environment(self) -> VerifierConfig:
        if self.environment_mode == "shared" and self.environment is not None:
            raise ValueError("environment_mode = 'shared' is incompatible with [verifier.environment]")
        return self

    @property
    def separate(self) -> bool:
        """Harbor's resolution: explicit mode, else separate when an environment is given."""
        return self.environment_mode == "separate" or (self.environment_mode is None and self.environment is not None)


class AgentConfig(_Network):
    timeout_sec: float | None = None
    user: str | int | None = None


class SolutionConfig(_Strict):
    env: dict[str, str] = {}


class StepConfig(_Strict):
    name: str
    agent: AgentConfig = AgentConfig()
    verifier: VerifierConfig = VerifierConfig()
    min_reward: float | dict[str, float] | None = None
    healthcheck: Healthcheck | None = None
    artifacts: list[str | Artifact] = []


class TaskConfig(_Strict):
    schema_version: str = "1.4"
    version: str | None = None  # the old name of schema_version
    task: PackageInfo | None = None
    metadata: dict[str, Any] = {}
    verifier: VerifierConfig = VerifierConfig()
    agent: AgentConfig = AgentConfig()
    environment: EnvironmentConfig = EnvironmentConfig()
    solution: SolutionConfig = SolutionConfig()
    source: str | None = None
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    steps: list[StepConfig] | None = None
    artifacts: list[str | Artifact] = Field(default_factory=list)


def artifacts(entries: list[str | Artifact]) -> list[Artifact]:
    """Harbor's artifact entries (a bare path or a table) as tables; one source listed once."""
    out: list[Artifact] = []
    for e in entries:
        a = Artifact(source=e) if isinstance(e, str) else e
        if a.source in {x.source for x in out}:
            raise ValueError(f"artifact source {a.source!r} is listed twice")
        out.append(a)
    return out
