"""Harbor's task.toml schema in full (harbor 0.25.0): Terminal-Bench 3 and 4 tasks load with their
separate verifier, artifacts, collect hooks and cheat solution; what metaopt cannot honour is a
load error naming the key (never silently dropped)."""

from pathlib import Path

import pytest

from metaopt.benchmarks import harbor
from metaopt.benchmarks.formats import TaskFormatError
from metaopt.benchmarks.registry import load_benchmark
from metaopt.benchmarks.task import Task
from metaopt.evaluation.runners import needs_root


def task_dir(root: Path, toml: str, *, tests_dockerfile: bool = False, cheat: bool = False) -> Path:
    d = root / "t"
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "task.toml").write_text(toml)
    (d / "instruction.md").write_text("Do it.\n")
    (d / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (d / "tests" / "test.sh").write_text("exit 0\n")
    (d / "solution" / "solve.sh").write_text("true\n")
    if tests_dockerfile:
        (d / "tests" / "Dockerfile").write_text("FROM debian:bookworm-slim\nCOPY . /tests/\n")
    if cheat:
        (d / "cheat").mkdir()
        (d / "cheat" / "solve.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    return d


def test_sample_set_is_terminal_bench_3_shaped():
    tasks = [t for t in load_benchmark("terminalbench3-sample") if isinstance(t, Task)]
    assert len(tasks) >= 3
    for t in tasks:
        assert t.verifier.separate and t.cheat is not None and t.solution is not None, t.id
        assert t.verifier.environment is not None
    by_id = {t.id: t for t in tasks}
    assert [a.source for a in by_id["word-frequency-cli"].artifacts] == ["/app/wordfreq.py", "/logs/artifacts"]
    assert by_id["word-frequency-cli"].verifier.environment.context_dir.name == "tests"  # tests/Dockerfile
    assert by_id["release-bundle"].verifier.environment.context_dir.name == "tests"  # implied by [verifier.environment]
    assert by_id["release-bundle"].artifacts[0].exclude == ["*.tmp"]
    assert by_id["service-account-setup"].verifier.collect[0].command.startswith("getent passwd ingest")
    assert by_id["service-account-setup"].verifier.environment.context_dir.name == "environment"  # a fresh copy


@pytest.mark.parametrize("toml, field", [
    ('[verifier]\nenviroment_mode = "separate"\n', "verifier.enviroment_mode"),
    ('[environment]\nnetwork = "none"\n', "environment.network"),
    ('bogus = 1\n', "bogus"),
    ('[[steps]]\nname = "one"\n', "steps"),
    ('[environment]\nos = "windows"\n', "environment.os"),
    ('[[environment.mcp_servers]]\nname = "m"\nurl = "http://x"\n', "environment.mcp_servers"),
    ('[environment]\ntpu = {type = "v6e", topology = "2x2"}\n', "environment.tpu"),
    ('[[verifier.collect]]\ncommand = "true"\n', "verifier.collect"),
    ('[verifier]\nenvironment_mode = "separate"\n[[verifier.collect]]\ncommand = "x"\nservice = "db"\n',
     "verifier.collect"),
    ('artifacts = ["/app/../etc"]\n', "artifacts"),
    ('artifacts = ["/app/out", {source = "/app/out"}]\n', "artifacts"),
    ('[[artifacts]]\nsource = "/x"\nservice = "db"\n', "artifacts"),
    ('[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ndocker_image = "x"\n', "verifier"),
    ('[environment]\nallowed_hosts = ["example.com"]\n', "environment"),
])
def test_what_metaopt_cannot_honour_is_an_error_naming_the_key(tmp_path, toml, field):
    with pytest.raises(TaskFormatError) as e:
        harbor.load(task_dir(tmp_path, toml), "tb")
    assert f"field '{field}" in str(e.value) and "task.toml" in str(e.value)


def test_separate_verifier_environment_in_harbors_order(tmp_path):
    image = harbor.load(task_dir(tmp_path / "a", '[verifier.environment]\ndocker_image = "v:1"\n',
                                 tests_dockerfile=True), "tb")
    assert image.verifier.separate and image.verifier.environment.image == "v:1"  # the image comes first
    own = harbor.load(task_dir(tmp_path / "b", '[verifier]\nenvironment_mode = "separate"\n', tests_dockerfile=True), "tb")
    assert own.verifier.environment.context_dir == own.source_dir / "tests"
    fresh = harbor.load(task_dir(tmp_path / "c", '[verifier]\nenvironment_mode = "separate"\n'), "tb")
    assert fresh.verifier.environment.context_dir == fresh.source_dir / "environment"
    shared = harbor.load(task_dir(tmp_path / "d", "", tests_dockerfile=True), "tb")
    assert not shared.verifier.separate and shared.verifier.environment is None


def test_network_policies_and_cheat(tmp_path):
    t = harbor.load(task_dir(tmp_path / "a", '[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n'
                                             '[verifier]\nenvironment_mode = "separate"\nnetwork_mode = "no-network"\n',
                             cheat=True), "tb")
    assert t.network and not t.verifier.network
    assert any("allowlist (pypi.org) is not enforced" in w for w in t.warnings)
    assert t.cheat is not None and t.cheat.command == "bash /solution/solve.sh"
    quiet = harbor.load(task_dir(tmp_path / "b", '[environment]\nnetwork_mode = "no-network"\n'
                                                 '[agent]\nnetwork_mode = "public"\n'), "tb")
    assert quiet.network and quiet.cheat is None and not quiet.warnings  # the agent's phase override


def test_tests_that_run_the_submission_as_another_user_keep_root(tmp_path):
    d = task_dir(tmp_path, "")
    (d / "tests" / "test_outputs.py").write_text('subprocess.run(["python3", "/app/x.py"], user="nobody")\n')
    assert needs_root(harbor.load(d, "tb"))
    (d / "tests" / "test_outputs.py").write_text('subprocess.run(["python3", "/app/x.py"])\n')
    assert not needs_root(harbor.load(d, "tb"))
