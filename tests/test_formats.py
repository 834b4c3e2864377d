"""Task loaders: Terminal-Bench 1.x and Harbor directories, detected by marker file."""

from pathlib import Path

import pytest

from metaopt.benchmarks.datasets import load_dataset
from metaopt.benchmarks.registry import BenchmarkError, load_benchmark
from metaopt.benchmarks.task import Task, TaskLoadError

COMPOSE = """services:
  client:
    build:
      dockerfile: Dockerfile
    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
    command: ["sh", "-c", "sleep infinity"]
    environment:
      - TEST_DIR=${T_BENCH_TEST_DIR}
"""


def tb1(root: Path, name: str, task_yaml: str, compose: str = COMPOSE, solution: str | None = "echo hi > /app/x\n") -> Path:
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "task.yaml").write_text(task_yaml)
    (d / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /app\n")
    (d / "docker-compose.yaml").write_text(compose)
    (d / "run-tests.sh").write_text("pytest $TEST_DIR/test_outputs.py -rA\n")
    (d / "tests" / "test_outputs.py").write_text("def test_x(): pass\n")
    if solution:
        (d / "solution.sh").write_text(solution)
    return d


def harbor(root: Path, name: str, toml: str) -> Path:
    d = root / name
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "task.toml").write_text(toml)
    (d / "instruction.md").write_text("Do the thing.\n")
    (d / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /srv\n")
    (d / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (d / "solution" / "solve.sh").write_text("true\n")
    return d


def test_tb1_fields_and_defaults(tmp_path):
    tb1(tmp_path, "hello", "instruction: |\n  Say hello.\ndifficulty: easy\ntags: [a, b]\nunknown_key: 1\n")
    [t] = load_dataset(tmp_path, "terminalbench")
    assert isinstance(t, Task)
    assert (t.id, t.format, t.scoring, t.workdir) == ("hello", "tb1", "pytest", "/app")
    assert t.instruction == "Say hello.\n" and t.tags == ["a", "b"]
    assert (t.agent_timeout_s, t.verifier.timeout_s) == (360.0, 60.0)
    assert t.verifier.command == "bash /tests/run-tests.sh" and t.verifier.env == {"TEST_DIR": "/tests"}
    assert {dest for _, dest in t.verifier.files} == {"/tests/run-tests.sh", "/tests/test_outputs.py"}
    assert t.solution.command == "bash /oracle/solution.sh"
    assert t.network is False


def test_tb1_solution_yaml(tmp_path):
    d = tb1(tmp_path, "steps", "instruction: x\ndifficulty: hard\n", solution=None)
    (d / "solution.yaml").write_text("- command: echo a > /app/a\n  max_timeout_sec: 5\n- command: cat /app/a\n")
    [t] = load_dataset(d, "terminalbench")
    assert t.solution.steps == ["echo a > /app/a", "cat /app/a"]
    assert t.solution.step_timeouts_s == [5.0, 180.0]


@pytest.mark.parametrize(
    "task_yaml, expected",
    [
        ("difficulty: easy\n", "missing required field 'instruction'"),
        ("instruction: x\ndifficulty: trivial\n", "field 'difficulty'"),
        ("instruction: x\ndifficulty: easy\nmax_agent_timeout_sec: soon\n", "field 'max_agent_timeout_sec'"),
        ("instruction: [unclosed\n", "not valid YAML"),
        ("- a list\n", "expected a mapping"),
    ],
)
def test_tb1_bad_task_yaml_is_an_error_row_naming_file_and_field(tmp_path, task_yaml, expected):
    tb1(tmp_path, "bad", task_yaml)
    tb1(tmp_path, "good", "instruction: x\ndifficulty: easy\n")
    bad, good = load_dataset(tmp_path, "terminalbench")
    assert isinstance(bad, TaskLoadError) and isinstance(good, Task)
    assert "task.yaml" in bad.error and expected in bad.error


def test_tb1_multi_service_compose_loads_its_services(tmp_path):
    extra = """    depends_on: {server: {condition: service_healthy}}
  server:
    build: {context: ./srv, dockerfile: Dockerfile.srv}
    command: python3 -m http.server ${PORT:-8080}
    environment: {MODE: fast, DEBUG: false}
    hostname: web
    mem_limit: 256m
    healthcheck: {test: "curl -f localhost:8080", interval: 1m30s, retries: 5}
  cache:
    image: redis:7
    depends_on: [server]
    ports: ["6379:6379"]
"""
    d = tb1(tmp_path, "multi", "instruction: x\ndifficulty: easy\n", compose=COMPOSE + extra)
    (d / "srv").mkdir()
    (d / "srv" / "Dockerfile.srv").write_text("FROM python:3.11-slim\n")
    [t] = load_dataset(tmp_path, "terminalbench")
    env = t.environment
    assert (env.main_service, env.env, env.dockerfile) == ("client", {"TEST_DIR": "/tests"}, "Dockerfile")
    server, cache = env.services
    assert (server.name, server.context_dir, server.dockerfile) == ("server", d / "srv", "Dockerfile.srv")
    assert server.command == ["python3", "-m", "http.server", "8080"]
    assert (server.env, server.aliases, server.memory_mb) == ({"MODE": "fast", "DEBUG": "false"}, ["web"], 256)
    assert server.healthcheck.test == ["CMD-SHELL", "curl -f localhost:8080"]
    assert (server.healthcheck.interval_s, server.healthcheck.retries) == (90.0, 5)
    assert (cache.image, cache.context_dir, cache.depends_on) == ("redis:7", None, {"server": "service_started"})


@pytest.mark.parametrize("extra, expected", [
    ("  db:\n    image: postgres\n    volumes: [./data:/var/lib/data]\n", "services.db.volumes is not supported"),
    ("  db:\n    image: postgres\n    depends_on: [client]\n", "depending on the agent's service"),
    ("  db:\n    image: postgres\n    depends_on: [nope]\n", "no service 'nope'"),
    ("  db:\n    image: a\n    depends_on: [db2]\n  db2:\n    image: b\n    depends_on: [db]\n", "cycle"),
    ("  db:\n    build: {context: ../elsewhere}\n", "outside the task directory"),
    ("  db:\n    privileged: true\n    image: a\n", "services.db.privileged is not supported"),
])
def test_tb1_compose_features_that_cannot_run_are_refused(tmp_path, extra, expected):
    tb1(tmp_path, "multi", "instruction: x\ndifficulty: easy\n", compose=COMPOSE + extra)
    [t] = load_dataset(tmp_path, "terminalbench")
    assert isinstance(t, TaskLoadError) and expected in t.error, t


def test_harbor_compose_services_and_main_overrides(tmp_path):
    d = harbor(tmp_path, "svc", "[environment]\nallow_internet = false\n")
    (d / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    environment: [API=http://api:80]\n    depends_on: [api]\n"
        "  api:\n    image: ${MAIN_IMAGE_NAME}-api\n    entrypoint: [\"/bin/sh\", \"-c\"]\n    command: [\"sleep 1\"]\n")
    [t] = load_dataset(tmp_path, "terminalbench")
    [api] = t.environment.services
    assert (t.environment.main_service, t.environment.env) == ("main", {"API": "http://api:80"})
    assert (api.image, api.entrypoint, api.command) == ("hb__svc-api", ["/bin/sh", "-c"], ["sleep 1"])


def test_harbor_fields(tmp_path):
    harbor(tmp_path, "fix-git", """schema_version = "1.1"
[metadata]
difficulty = "easy"
tags = ["git"]
[agent]
timeout_sec = 900.0
[verifier]
timeout_sec = 120.0
env = { FOO = "bar" }
[environment]
cpus = 1
memory = "2G"
allow_internet = true
""")
    [t] = load_dataset(tmp_path, "terminalbench")
    assert (t.format, t.scoring, t.workdir, t.network) == ("harbor", "reward", "/srv", True)
    assert (t.agent_timeout_s, t.verifier.timeout_s, t.verifier.env) == (900.0, 120.0, {"FOO": "bar"})
    assert (t.resources.cpus, t.resources.memory_mb) == (1.0, 2048)
    assert t.tags == ["git"] and t.metadata["difficulty"] == "easy"
    assert t.solution.command == "bash /solution/solve.sh"
    assert t.verifier.files == [(tmp_path / "fix-git" / "tests", "/tests")]


def test_terminal_bench_2_1_task_toml(tmp_path):
    """TB 2.1 adds a [task] table, artifacts, mcp_servers and env tables (as its public task repos
    show); the task loads as 2.0 does, its registry name and description in metadata."""
    harbor(tmp_path, "fix-git", """schema_version = "1.1"
artifacts = []
[task]
name = "terminal-bench/fix-git"
description = "Recover lost commits."
keywords = ["coding", "version-control"]
[[task.authors]]
name = "someone"
[metadata]
difficulty = "easy"
[environment]
docker_image = "alexgshaw/fix-git:20260403"
allow_internet = true
mcp_servers = []
[verifier.env]
[environment.env]
[solution.env]
""")
    [t] = load_dataset(tmp_path, "terminalbench")
    assert (t.id, t.environment.image, t.network) == ("fix-git", "alexgshaw/fix-git:20260403", True)
    assert (t.metadata["task_name"], t.metadata["description"]) == ("terminal-bench/fix-git", "Recover lost commits.")
    assert t.tags == ["coding", "version-control"]


def test_harbor_defaults_and_no_network_unless_asked(tmp_path):
    harbor(tmp_path, "plain", "")
    [t] = load_dataset(tmp_path, "terminalbench")
    assert (t.agent_timeout_s, t.verifier.timeout_s, t.network) == (600.0, 600.0, False)


@pytest.mark.parametrize(
    "toml, expected",
    [
        ("[agent]\ntimeout_sec = 'long'\n", "field 'agent.timeout_sec'"),
        ("[environment]\nnetwork_mode = 'sometimes'\n", "field 'environment.network_mode'"),
        ("[agent\n", "not valid TOML"),
        ("[environment]\nmemory = 'lots'\n", "environment.memory"),
    ],
)
def test_harbor_bad_task_toml(tmp_path, toml, expected):
    harbor(tmp_path, "bad", toml)
    [t] = load_dataset(tmp_path, "terminalbench")
    assert isinstance(t, TaskLoadError) and "task.toml" in t.error and expected in t.error


def test_harbor_missing_test_sh(tmp_path):
    d = harbor(tmp_path, "notests", "")
    (d / "tests" / "test.sh").unlink()
    [t] = load_dataset(tmp_path, "terminalbench")
    assert isinstance(t, TaskLoadError) and "tests/test.sh: missing" in t.error


def test_registry_errors(tmp_path):
    with pytest.raises(BenchmarkError, match="unknown benchmark 'nope' \\(known: terminalbench-sample, terminalbench"):
        load_benchmark("nope")
    with pytest.raises(BenchmarkError, match="needs --dataset"):
        load_benchmark("terminalbench")
    with pytest.raises(BenchmarkError, match="does not exist"):
        load_benchmark("terminalbench", tmp_path / "missing")
    with pytest.raises(BenchmarkError, match="no tasks found"):
        load_benchmark("terminalbench", tmp_path)
    tb1(tmp_path, "one", "instruction: x\ndifficulty: easy\n")
    with pytest.raises(BenchmarkError, match="unknown task id 'two'"):
        load_benchmark("terminalbench", tmp_path, ["two"])
    assert [t.id for t in load_benchmark("terminalbench", tmp_path, ["one"])] == ["one"]
