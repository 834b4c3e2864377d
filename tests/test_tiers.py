"""The suite's tiers are derived, not hand-written (tests/conftest.py): a test is marked docker, root,
model, ray or browser from the fixtures it uses, and the fast tier holds no test that reaches those
resources some other way."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FAST_TIER_EXCLUDES, NO_DAEMON, RESOURCES

TESTS = Path(__file__).parent
# What reaches each resource directly. Inside tests/ these appear only in the fixtures that give it.
GATEWAYS = {"docker": ("docker.from_env", "DockerBackend("),
            "model": ("local/qwen", "LocalServer("),
            "ray": ("RayCluster(",),
            "browser": ("sync_playwright", "chromium.launch")}
# Tests that name a gateway without using the resource, each with the reason.
NOT_A_USE = {"test_cli_failed_download_and_checksum_mismatch_are_one_line_exit_2":
             "pulls the real pins with no package index: fails before any weights exist"}


@pytest.fixture(scope="module")
def marks(tmp_path_factory) -> dict[str, set[str]]:
    """Every test's node id -> the tier marks it got, from one real collection of the suite."""
    out = tmp_path_factory.mktemp("marks") / "marks.json"
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(TESTS)],
                       capture_output=True, text=True, check=False, timeout=600, cwd=TESTS.parent,
                       env={**os.environ, "METAOPT_TEST_MARKS": str(out)})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return {node: set(m) for node, m in json.loads(out.read_text()).items()}


def sources() -> dict[str, str]:
    """Test function name -> its source, over every test module and helper (inherited suites too)."""
    out: dict[str, str] = {}
    for p in TESTS.glob("*.py"):
        if p.name == Path(__file__).name:  # names the gateways itself
            continue
        text = p.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and node.name not in NOT_A_USE:
                out[node.name] = out.get(node.name, "") + (ast.get_source_segment(text, node) or "")
    return out


def test_no_resource_mark_is_written_by_hand():
    marks = "|".join(RESOURCES)
    bad = [f"{p.name}:{i}" for p in TESTS.glob("*.py") if p.name != "conftest.py"
           for i, line in enumerate(p.read_text().splitlines(), 1)
           if re.search(rf"pytest\.mark\.({marks})\b", line)]
    assert not bad, f"resource marks come from fixtures (conftest.RESOURCES), not by hand: {bad}"


def test_the_fast_tier_reaches_no_docker_model_ray_or_browser(marks):
    fast = [n for n, m in marks.items() if not m & FAST_TIER_EXCLUDES]
    assert len(fast) > 300, len(fast)
    code = sources()
    bad = [(n, kind, token) for n in fast for kind, tokens in GATEWAYS.items()
           for token in tokens if token in code.get(re.sub(r"\[.*\]$", "", n.split("::")[-1]), "")]
    assert not bad, f"fast-tier tests that reach a resource without its fixture: {bad}"


def test_marks_follow_the_fixtures(marks):
    def having(mark: str) -> set[str]:
        return {n for n, m in marks.items() if mark in m}

    assert "tests/test_sandbox_docker.py::test_no_network_by_default_and_bridge_on_request" in having("docker")
    assert any(n.startswith("tests/test_eval_e2e.py::") for n in having("docker"))  # through an autouse fixture
    assert not any(n.startswith("tests/test_sandbox_local.py::") for n in having("docker"))  # own make_sandbox
    assert "tests/test_meta_agent_local.py::test_two_real_proposals_reach_the_guard_and_the_second_consults_the_history" in having("model")
    assert any(n.startswith("tests/test_ray_executor.py::") for n in having("ray"))
    assert any(n.startswith("tests/test_explorer.py::") for n in having("browser"))
    assert any(n.startswith("tests/test_optimizer_local.py::") for n in having("root"))


def test_a_test_not_marked_docker_cannot_reach_the_daemon():
    assert os.environ["DOCKER_HOST"] == NO_DAEMON
    docker = pytest.importorskip("docker")
    with pytest.raises(docker.errors.DockerException):
        docker.from_env().ping()
