"""Terminal-Bench 1.x task directories (`task.yaml` + Dockerfile + docker-compose.yaml).

Field names, defaults and the trial sequence follow terminal-bench 0.2.18 (see
shared/reference/benchmark-formats.md section 1). Unknown task.yaml keys are ignored, as upstream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from metaopt.benchmarks import compose
from metaopt.benchmarks.formats import TaskFormatError, dockerfile_workdir, first_error, needs_services
from metaopt.benchmarks.task import Environment, Solution, Task, Verifier

MARKER = "task.yaml"
TEST_DIR = "/tests"


class _TaskYaml(BaseModel):
    model_config = ConfigDict(extra="ignore")

    instruction: str
    difficulty: Literal["easy", "medium", "hard", "unknown"]
    author_name: str = "unknown"
    category: str = "software_engineering"
    tags: list[str] = []
    parser_name: str = "pytest"
    max_agent_timeout_sec: float = 360.0
    max_test_timeout_sec: float = 60.0
    run_tests_in_same_shell: bool = False


class _SolutionStep(BaseModel):
    model_config = ConfigDict(extra="ignore")

    command: str
    min_timeout_sec: float = 0.0
    max_timeout_sec: float = 180.0
    block: bool = False
    append_enter: bool = True


def load(task_dir: Path, benchmark: str) -> Task:
    """Load one TB1 task directory. Raises TaskFormatError naming the file and field."""
    path = task_dir / MARKER
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise TaskFormatError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise TaskFormatError(f"{path}: expected a mapping of fields, got {type(raw).__name__}")
    try:
        cfg = _TaskYaml.model_validate(raw)
    except ValidationError as e:
        raise TaskFormatError(f"{path}: {first_error(e)}") from None
    if cfg.parser_name != "pytest":
        raise TaskFormatError(f"{path}: parser_name '{cfg.parser_name}' is not supported (only pytest)")

    spec = _compose(task_dir)
    dockerfile = spec.main_build["dockerfile"] if spec and spec.main_build else "Dockerfile"
    if not (task_dir / dockerfile).is_file():
        raise TaskFormatError(f"{task_dir / dockerfile}: missing (the task's environment)")
    run_tests = task_dir / "run-tests.sh"
    if not run_tests.is_file():
        raise TaskFormatError(f"{run_tests}: missing (the task's test runner)")

    files = [(run_tests, f"{TEST_DIR}/run-tests.sh")]
    tests_dir = task_dir / "tests"
    if tests_dir.is_dir():
        files += [(p, f"{TEST_DIR}/{p.name}") for p in sorted(tests_dir.iterdir())]

    dockerfile_text = (task_dir / dockerfile).read_text(errors="replace")
    warnings = []
    if "tests/" in dockerfile_text and "COPY" in dockerfile_text.upper():
        warnings.append("the Dockerfile may COPY test files into the image (visible to the agent)")
    return Task(
        id=task_dir.name,
        benchmark=benchmark,
        format="tb1",
        source_dir=task_dir,
        instruction=cfg.instruction,
        environment=Environment(context_dir=task_dir, dockerfile=dockerfile, **_services(spec)),
        workdir=dockerfile_workdir(dockerfile_text),
        agent_timeout_s=cfg.max_agent_timeout_sec,
        verifier=Verifier(
            files=files,
            command=f"bash {TEST_DIR}/run-tests.sh",
            timeout_s=cfg.max_test_timeout_sec,
            env={"TEST_DIR": TEST_DIR},
            keep_services=needs_services(cfg.instruction, [p for p, _ in files]),
        ),
        scoring="pytest",
        solution=_solution(task_dir),
        tags=cfg.tags,
        metadata={"difficulty": cfg.difficulty, "category": cfg.category, "author": cfg.author_name},
        warnings=warnings,
    )


def _compose(task_dir: Path) -> compose.Compose | None:
    """The task's compose file read with the `client` service as the agent's; None without one.
    The client must be built from the task directory (as in the template)."""
    path = task_dir / "docker-compose.yaml"
    if not path.is_file():
        return None
    name = task_dir.name.replace(".", "-")
    read = compose.read(path, "client", {
        "T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME": f"tb__{name}__client", "T_BENCH_TASK_DOCKER_NAME_PREFIX": f"tb__{name}",
        "T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME": name, "T_BENCH_TEST_DIR": TEST_DIR,
        "T_BENCH_CONTAINER_LOGS_PATH": "/logs", "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/agent-logs",
        "T_BENCH_TASK_LOGS_PATH": "/logs", "T_BENCH_TASK_AGENT_LOGS_PATH": "/agent-logs"})
    read.main_build = read.main_build or {"context": ".", "dockerfile": "Dockerfile"}
    if read.main_build["context"] not in (".", "./"):
        raise TaskFormatError(f"{path}: services.client.build.context must be the task directory")
    return read


def _services(spec: compose.Compose | None) -> dict:
    """Environment fields of a multi-service task: its services, the client's name and env."""
    if spec is None or not spec.services:
        return {}  # the template compose: one container, as a plain build
    return {"services": spec.services, "main_service": spec.main, "env": spec.main_env}


def _solution(task_dir: Path) -> Solution | None:
    sh = task_dir / "solution.sh"
    if sh.is_file():
        return Solution(files=[(sh, "/oracle/solution.sh")], command="bash /oracle/solution.sh")
    yml = task_dir / "solution.yaml"
    if not yml.is_file():
        return None
    try:
        steps = [_SolutionStep.model_validate(s) for s in yaml.safe_load(yml.read_text()) or []]
    except (yaml.YAMLError, ValidationError, TypeError) as e:
        raise TaskFormatError(f"{yml}: not a list of {{command, max_timeout_sec, ...}} ({e})") from None
    return Solution(
        steps=[s.command.rstrip("\n") if s.append_enter else s.command for s in steps],
        step_timeouts_s=[s.max_timeout_sec for s in steps],
    )
