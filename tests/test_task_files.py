"""Task files shipped to another machine (evaluation.task_files): what a node unpacks is the
task, byte for byte, with its paths under the node's cache; archives are fetched once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metaopt.benchmarks.registry import load_benchmark
from metaopt.evaluation.task_files import CACHE_ENV, pack, unpack
from metaopt.sandbox.images import context_digest, context_files


@pytest.fixture(autouse=True)
def node_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "node"))
    return tmp_path / "node"


def tree(root: Path) -> dict[str, bytes]:
    if root.is_file():
        return {root.name: root.read_bytes()}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("bench", ["terminalbench-sample", "spreadsheetbench-sample"])
def test_a_node_gets_the_same_files_under_its_own_cache(bench, node_cache):
    task = load_benchmark(bench)[0]
    payload, blobs = pack(task)
    fetched: list[str] = []
    shipped = json.loads(json.dumps(payload))  # what crosses the machine boundary
    local = unpack(shipped, lambda d: fetched.append(d) or blobs[d])
    assert sorted(fetched) == sorted(blobs), "each archive fetched once"
    assert unpack(shipped, lambda d: pytest.fail("fetched again")) == local
    assert local.instruction == task.instruction and local.verifier.command == task.verifier.command
    assert local.environment.context_dir.is_relative_to(node_cache)
    assert tree(local.environment.context_dir) == tree(task.environment.context_dir)
    for (here, dest), (there, dest2) in zip(task.verifier.files, local.verifier.files):
        assert dest == dest2 and there.is_relative_to(node_cache) and tree(there) == tree(here)
    # the image tag hashes contents, not paths: the node builds (or finds) the same image
    ctx, ctx2, df = task.environment.context_dir, local.environment.context_dir, task.environment.dockerfile
    assert (context_digest(ctx, context_files(ctx, df), []) == context_digest(ctx2, context_files(ctx2, df), []))


def test_file_modes_survive_the_trip(tmp_path):
    [task] = load_benchmark("terminalbench-sample", task_ids=["hello-greetings"])
    payload, blobs = pack(task)
    local = unpack(payload, blobs.__getitem__)
    modes = {p.relative_to(task.source_dir): p.stat().st_mode for p in task.source_dir.rglob("*")}
    assert {p.relative_to(local.source_dir): p.stat().st_mode for p in local.source_dir.rglob("*")} == modes
