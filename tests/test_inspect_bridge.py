"""inspect-ai tasks as benchmarks (`--benchmark inspect:<module>@<task>`): the samples run with our
harness agent in our Docker sandbox, traced, and their scores equal what inspect's own eval gives
for the same final state; inspect can also run samples in our sandbox directly; bad task
references are one line and exit 2."""

import json
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from _docker_fixtures import metaopt

from metaopt.benchmarks.registry import BenchmarkError, load_benchmark
from metaopt.benchmarks.task import Task, TaskLoadError
from metaopt.traces.store import Store

HERE = Path(__file__).parent / "inspect_tasks"
TASK_FILE = HERE / "sample_task.py"
SCRIPT = HERE / "agent_script.yaml"
BENCH = f"inspect:{TASK_FILE}@my_task"
EXPECTED = {"arith": 1.0, "capital": 0.0, "file-made": 1.0, "file-partial": 0.5}


def _script() -> tuple[list[str], str]:
    """The bash commands and final answer of the fake agent's script (the same for every sample)."""
    import yaml

    steps = yaml.safe_load(SCRIPT.read_text())
    commands = [s["arguments"]["command"] for s in steps if s.get("tool") == "bash"]
    answer = next(s["arguments"]["summary"] for s in steps if s.get("tool") == "finish")
    return commands, answer


def _inspect_scores(kind: str, log_dir: Path) -> dict[str, float]:
    """Run my_task through inspect's own eval with a solver that does what our fake agent does."""
    import inspect_ai
    from inspect_ai.model import ModelOutput
    from inspect_ai.solver import solver
    from inspect_ai.util import sandbox as current_sandbox

    import metaopt.sandbox.inspect_env  # noqa: F401  registers the `metaopt` sandbox with inspect
    from metaopt.benchmarks.inspect_bridge.loader import _load
    from metaopt.benchmarks.inspect_bridge.scoring import to_float

    commands, answer = _script()

    @solver
    def replay():
        async def solve(state, generate):
            for cmd in commands:
                r = await current_sandbox().exec(["bash", "-c", cmd])
                assert r.success, r.stderr
            state.output = ModelOutput.from_content("mockllm/model", answer)
            return state

        return solve

    task = _load(f"{TASK_FILE}@my_task").task
    [log] = inspect_ai.eval(task, solver=replay(), model="mockllm/model", sandbox=kind,
                            log_dir=str(log_dir), display="none", max_samples=2)
    assert log.status == "success", log.error
    return {str(s.id): to_float(s.scores["by_check"].value) for s in log.samples}


@pytest.mark.usefixtures("docker_image")
def test_inspect_task_runs_as_benchmark_and_scores_match_inspect(docker_image, tmp_path):
    db = tmp_path / "m.duckdb"
    r = metaopt("eval", "--benchmark", BENCH, "--harness", "minimal", "--model", f"fake/script:{SCRIPT}",
                "--db", str(db), "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    ours = {t["task_id"]: t["score"] for t in json.loads(r.stdout)["tasks"]}
    assert ours == EXPECTED
    # inspect's own eval of the same task, same actions and answer, in its own local sandbox
    assert _inspect_scores("local", tmp_path / "logs") == ours

    store = Store(db)
    try:
        rows = {t["task_id"]: t for t in store.rows("SELECT * FROM trials")}
        spans = store.rows("SELECT trace_id, count(*) AS n FROM spans GROUP BY trace_id")
    finally:
        store.close()
    traced = {s["trace_id"]: s["n"] for s in spans}
    for tid, row in rows.items():
        assert row["benchmark"] == BENCH and row["status"] == ("passed" if EXPECTED[tid] == 1 else "failed")
        assert traced.get(row["trace_id"], 0) >= 3, f"{tid}: no trace"  # agent, chat and tool spans
    detail = json.loads(rows["file-partial"]["test_output"])["by_check"]
    assert detail["explanation"] == "1 of 2 lines found in work/out.txt" and detail["metadata"] == {"found": ["hello"]}
    assert json.loads(rows["capital"]["rewards"]) == {"by_check": 0.0}


@pytest.mark.usefixtures("docker_image")
def test_inspect_runs_samples_in_metaopt_sandbox(docker_image, tmp_path):
    """`--sandbox metaopt`: inspect starts each sample in our Docker sandbox; same scores."""
    import docker

    assert _inspect_scores("metaopt", tmp_path / "logs") == EXPECTED
    from metaopt.sandbox.inspect_env import MetaoptSandboxEnvironment

    run_id = MetaoptSandboxEnvironment._run_id
    assert run_id is not None  # the samples really went through our sandbox
    left = docker.from_env().containers.list(all=True, filters={"label": f"metaopt.run_id={run_id}"})
    assert left == []  # sample_cleanup removed every container


@pytest.mark.usefixtures("docker_image")
def test_sample_files_and_setup_are_in_place_for_the_oracle(docker_image, tmp_path, monkeypatch):
    """Files and setup are baked into the sample's image; the oracle runs metadata `solution`."""
    from metaopt.evaluation import OracleAgent, run_eval
    from metaopt.sandbox.docker import DockerBackend

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    name = f"inspect:{TASK_FILE}@staged_task"
    backend, store = DockerBackend(), Store(tmp_path / "m.duckdb")
    try:
        result = run_eval(load_benchmark(name), OracleAgent(), benchmark=name, backend=backend, store=store)
    finally:
        store.close()
    scores = {r.task_id: (r.score, r.status) for r in result.rows}
    assert scores == {"copies": (1.0, "passed"), "does-nothing": (0.0, "failed")}, result.rows


@pytest.mark.usefixtures("docker_image")
def test_a_scorer_that_raises_is_an_error_not_a_zero(docker_image, tmp_path):
    from metaopt.evaluation import NopAgent, run_eval
    from metaopt.sandbox.docker import DockerBackend

    name = f"inspect:{TASK_FILE}@raising_task"
    store = Store(tmp_path / "m.duckdb")
    try:
        [row] = run_eval(load_benchmark(name), NopAgent(), benchmark=name, backend=DockerBackend(), store=store).rows
    finally:
        store.close()
    assert (row.score, row.status, row.failure_mode) == (None, "error", "scorer_error")
    assert row.error == "inspect scorer raised ValueError: boom"


def test_unimportable_module_is_one_line_exit_2():
    r = metaopt("eval", "--benchmark", "inspect:tests/inspect_tasks/no_such_file.py@my_task", "--agent", "nop")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no_such_file.py does not exist" in r.stderr
    r = metaopt("eval", "--benchmark", "inspect:no_such_package.tasks@x", "--agent", "nop")
    assert r.returncode == 2 and "cannot import no_such_package.tasks: ModuleNotFoundError" in r.stderr
    assert r.stderr.strip().count("\n") == 0


def test_unknown_task_name_lists_the_tasks(tmp_path):
    r = metaopt("eval", "--benchmark", f"inspect:{TASK_FILE}@nope", "--agent", "nop")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "has no task 'nope' (tasks: my_task, broken_task, staged_task, raising_task)" in r.stderr
    with pytest.raises(BenchmarkError, match=r"broken_task\(\) raised RuntimeError: this task cannot be built"):
        load_benchmark(f"inspect:{TASK_FILE}@broken_task")
    with pytest.raises(BenchmarkError, match="expected inspect:<module or file.py>@<task>"):
        load_benchmark(f"inspect:{TASK_FILE}")


def test_samples_become_tasks(tmp_path, monkeypatch):
    """Sample ids, instruction, choices, sandbox specs, staged files and unsupported features."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (tmp_path / "t.py").write_text(
        "from inspect_ai import Task, task\n"
        "from inspect_ai.dataset import Sample\n"
        "from inspect_ai.scorer import match\n"
        "@task\n"
        "def t():\n"
        "    return Task(dataset=[\n"
        "        Sample(input='Pick one.', choices=['red', 'blue'], target='A'),\n"
        "        Sample(input='x', sandbox=('docker', 'env/Dockerfile'), metadata={'solution': 'echo 4'}),\n"
        "        Sample(input='y', files={'a.txt': 'hi', 'other:b.txt': 'x'}),\n"
        "        Sample(input='z', sandbox=('docker', 'compose.yaml')),\n"
        "        Sample(input='w', sandbox=('k8s', None)),\n"
        "        Sample(input='v', sandbox=('docker', 'env/Dockerfile'), files={'d/a.txt': 'hi'}, setup='touch /s'),\n"
        "    ], scorer=match(), time_limit=120)\n")
    tasks = load_benchmark(f"inspect:{tmp_path / 't.py'}@t")
    assert [t.id for t in tasks] == ["1", "2", "3", "4", "5", "6"]
    first, second = tasks[0], tasks[1]
    assert isinstance(first, Task) and first.scoring == "inspect" and not first.network
    assert first.instruction.startswith("Pick one.\n\nA) red\nB) blue\n\n")
    assert first.environment.image == "metaopt-base:latest" and first.agent_timeout_s == 120
    assert second.environment.context_dir == tmp_path / "env" and second.environment.dockerfile == "Dockerfile"
    assert second.solution is not None and second.solution.command == "echo 4"
    errors = {t.id: t.error for t in tasks if isinstance(t, TaskLoadError)}
    assert "file 'other:b.txt' targets sandbox 'other'" in errors["3"]
    staged = tasks[5].environment
    assert staged.context_dir.parent == tmp_path / "cache" / "metaopt" / "inspect-contexts"
    dockerfile = (staged.context_dir / staged.dockerfile).read_text().splitlines()
    assert dockerfile[0] == "FROM debian:bookworm-slim" and dockerfile[1].startswith('COPY [".metaopt-inspect/0", "d/a.txt"]')
    assert dockerfile[-1].startswith("RUN chmod +x /tmp/.metaopt-setup && /tmp/.metaopt-setup")
    assert "compose files (compose.yaml) are not supported" in errors["4"]
    assert "sandbox type 'k8s' cannot run" in errors["5"]
    assert [t.id for t in load_benchmark(f"inspect:{tmp_path / 't.py'}@t", task_ids=["2"])] == ["2"]


def test_score_values_map_like_inspect_metrics():
    from metaopt.benchmarks.inspect_bridge.scoring import to_float

    assert [to_float(v) for v in ("C", "I", "P", "N", 0.25, True)] == [1.0, 0.0, 0.5, 0.0, 0.25, 1.0]
    assert to_float({"a": "C", "b": 0.0}) == 0.5 and to_float([1, "I", "C", "C"]) == 0.75
