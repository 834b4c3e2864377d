"""Harbor / Terminal-Bench 2.x task directories (`task.toml` + `instruction.md`).

Keys and defaults follow harbor 0.25.0 (shared/reference/benchmark-formats.md section 2).
Unknown keys are ignored for forward compatibility; known keys are type-checked. Terminal-Bench
2.1 task.toml adds a `[task]` table (name "terminal-bench/<id>", description, keywords, authors),
top-level `artifacts`, `[environment].mcp_servers` and `[environment.env]` / `[solution.env]`;
its name and description go to the task's metadata, its keywords stand in for missing tags.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from metaopt.benchmarks import compose
from metaopt.benchmarks.formats import TaskFormatError, dockerfile_workdir, first_error, needs_services
from metaopt.benchmarks.task import Environment, Resources, Solution, Task, Verifier

MARKER = "task.toml"
REWARD_DIR = "/logs/verifier"


class _Agent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    timeout_sec: float = 600.0
    user: str | None = None


class _Verifier(BaseModel):
    model_config = ConfigDict(extra="ignore")
    timeout_sec: float = 600.0
    env: dict[str, str] = {}
    user: str | None = None
    environment_mode: Literal["shared", "separate"] = "shared"


class _Environment(BaseModel):
    model_config = ConfigDict(extra="ignore")
    docker_image: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    memory: str | None = None  # deprecated "2G"
    gpus: int = 0
    network_mode: Literal["public", "no-network", "allowlist"] | None = None
    allow_internet: bool | None = None  # deprecated
    workdir: str | None = None


class _Task(BaseModel):
    """Terminal-Bench 2.1's `[task]` table (its registry identity); 2.0 tasks have none."""
    model_config = ConfigDict(extra="ignore")
    name: str | None = None
    description: str | None = None
    keywords: list[str] = []


class _TaskToml(BaseModel):
    model_config = ConfigDict(extra="ignore")
    task: _Task = _Task()
    metadata: dict = {}
    agent: _Agent = _Agent()
    verifier: _Verifier = _Verifier()
    environment: _Environment = _Environment()
    steps: list = []


def load(task_dir: Path, benchmark: str) -> Task:
    """Load one Harbor task directory. Raises TaskFormatError naming the file and field."""
    path = task_dir / MARKER
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskFormatError(f"{path}: not valid TOML ({e})") from None
    try:
        cfg = _TaskToml.model_validate(raw)
    except ValidationError as e:
        raise TaskFormatError(f"{path}: {first_error(e)}") from None
    if cfg.steps:
        raise TaskFormatError(f"{path}: multi-step tasks ([[steps]]) are not supported yet")
    if cfg.verifier.environment_mode == "separate":
        raise TaskFormatError(f"{path}: [verifier].environment_mode = 'separate' is not supported yet")

    instruction = task_dir / "instruction.md"
    if not instruction.is_file():
        raise TaskFormatError(f"{instruction}: missing (the task's instruction)")
    test_sh = task_dir / "tests" / "test.sh"
    if not test_sh.is_file():
        raise TaskFormatError(f"{test_sh}: missing (the task's verifier)")

    env_dir = task_dir / "environment"
    spec = _compose(env_dir, task_dir.name)
    dockerfile = env_dir / "Dockerfile"
    env = cfg.environment
    if not dockerfile.is_file() and not env.docker_image:
        raise TaskFormatError(f"{path}: no environment/Dockerfile and no [environment].docker_image")
    workdir = env.workdir or (dockerfile_workdir(dockerfile.read_text(errors="replace")) if dockerfile.is_file() else None)

    solve = task_dir / "solution" / "solve.sh"
    solution = None
    if solve.is_file():
        solution = Solution(files=[(task_dir / "solution", "/solution")], command="bash /solution/solve.sh")

    meta: dict[str, str | float | int | bool | None] = {
        k: v for k, v in cfg.metadata.items() if isinstance(v, (str, int, float, bool))}
    if cfg.task.name:  # TB 2.1: "terminal-bench/<id>"
        meta.setdefault("task_name", cfg.task.name)
    if cfg.task.description:
        meta.setdefault("description", cfg.task.description)
    tags = cfg.metadata.get("tags") or cfg.task.keywords
    return Task(
        id=task_dir.name,
        benchmark=benchmark,
        format="harbor",
        source_dir=task_dir,
        instruction=instruction.read_text(),
        environment=Environment(
            context_dir=env_dir if dockerfile.is_file() else None,
            image=env.docker_image,
            **({"services": spec.services, "main_service": "main", "env": spec.main_env} if spec and spec.services else {}),
        ),
        workdir=workdir,
        agent_user=cfg.agent.user,
        agent_timeout_s=cfg.agent.timeout_sec,
        verifier=Verifier(
            files=[(task_dir / "tests", "/tests")],
            command="bash /tests/test.sh",
            timeout_s=cfg.verifier.timeout_sec,
            env=cfg.verifier.env,
            user=cfg.verifier.user or "root",
            keep_services=needs_services(instruction.read_text(), [task_dir / "tests"]),
        ),
        scoring="reward",
        solution=solution,
        resources=Resources(cpus=env.cpus, memory_mb=env.memory_mb or _memory_mb(env.memory, path), gpus=env.gpus),
        network=_network(env),
        tags=[str(t) for t in tags] if isinstance(tags, list) else [],
        metadata=meta,
    )


def _compose(env_dir: Path, name: str) -> compose.Compose | None:
    """environment/docker-compose.yaml read as Harbor merges it over its own base (service
    `main` built from environment/): the other services, and main's environment."""
    path = env_dir / "docker-compose.yaml"
    if not path.is_file():
        return None
    read = compose.read(path, "main", {"MAIN_IMAGE_NAME": f"hb__{name}", "CONTEXT_DIR": str(env_dir.resolve())})
    if read.main_build is not None and (env_dir / read.main_build["context"]).resolve() != env_dir.resolve():
        raise TaskFormatError(f"{path}: services.main.build.context must be the environment directory")
    return read


def _network(env: _Environment) -> bool:
    """No network unless the task asks for it (explicitly public, allowlist, or allow_internet)."""
    if env.network_mode is not None:
        return env.network_mode != "no-network"
    return bool(env.allow_internet)


def _memory_mb(memory: str | None, path: Path) -> int | None:
    if memory is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", memory, flags=re.IGNORECASE)
    if not m:
        raise TaskFormatError(f"{path}: field 'environment.memory': cannot read '{memory}' (e.g. '2G')")
    scale = {"": 1 / 2**20, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)
