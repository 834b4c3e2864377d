"""The kept-artifact store: content-addressed, deduplicated, capped (least recently used go first)."""

import io
import os
import time

import pytest

from metaopt.evaluation.artifact_store import ArtifactStore


def test_put_is_content_addressed_and_deduplicated(tmp_path):
    store = ArtifactStore(tmp_path / "a")
    one = store.put(io.BytesIO(b"x" * 100))
    again = store.put(io.BytesIO(b"x" * 100))
    assert one == again and one["bytes"] == 100 and len(one["sha256"]) == 64
    assert store.size() == 100
    with store.open(one["sha256"]) as f:
        assert f.read() == b"x" * 100
    with pytest.raises(ValueError):
        store.path("../../etc/passwd")
    with pytest.raises(FileNotFoundError):
        store.open("0" * 64)


def test_the_cap_and_prune_remove_the_least_recently_used(tmp_path):
    store = ArtifactStore(tmp_path / "a", max_bytes=250)
    a = store.put(io.BytesIO(b"a" * 100))["sha256"]
    b = store.put(io.BytesIO(b"b" * 100))["sha256"]
    old = time.time() - 100
    os.utime(store.path(a), (old, old))
    os.utime(store.path(b), (old + 1, old + 1))
    store.open(a).close()  # read: now the most recently used
    c = store.put(io.BytesIO(b"c" * 100))["sha256"]  # 300 > 250: the least recently used (b) goes
    assert {p.stem for p in store._files()} == {a, c}
    assert store.prune(100) == {"removed": 1, "freed_bytes": 100, "kept_bytes": 100}
    assert store.prune(0)["kept_bytes"] == 0 and store.size() == 0


def test_a_capture_is_kept_as_the_fewest_roots_and_its_deletions():
    from metaopt.sandbox.docker_artifacts import diff_roots

    changes = [("C", "/app"), ("A", "/app/new"), ("A", "/app/new/a.txt"), ("C", "/app/old.txt"),
               ("C", "/usr/sbin"), ("A", "/usr/sbin/docker-init"), ("D", "/app/gone"), ("D", "/app/new/x"),
               ("A", "/.metaopt-1234"), ("A", "/.metaopt-1234/busybox")]
    roots, deleted = diff_roots(changes, skip=("/usr/sbin/docker-init", "/.metaopt-"))
    assert roots == ["/app/new", "/app/old.txt"]  # a changed folder is never taken whole
    assert deleted == ["/app/gone"]
