"""DockerSandbox and DockerBackend against the real daemon: the conformance suite plus what is
Docker-specific (network, labels, limits, image builds and their cache, the image map, prune)."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import docker
import docker.errors
import pytest
from sandbox_conformance import SandboxConformance

from metaopt.core.errors import ImageBuildError, ImageNotFound, SandboxError, SandboxUnavailable
from metaopt.sandbox.base import SandboxSpec
from metaopt.sandbox.docker import DockerBackend
from metaopt.sandbox.images import ImageMap

pytestmark = [pytest.mark.usefixtures("docker_image"), pytest.mark.timeout(120)]


class TestDockerConformance(SandboxConformance):
    """The whole protocol suite; `make_sandbox` comes from _docker_fixtures."""


def test_no_network_by_default_and_bridge_on_request(make_sandbox):
    assert make_sandbox().exec("ls /sys/class/net").stdout.split() == ["lo"]
    assert "eth0" in make_sandbox(network=True).exec("ls /sys/class/net").stdout.split()


def test_labels_limits_and_removal(make_sandbox, docker_backend, test_run_id):
    sb = make_sandbox(cpus=0.5, memory_mb=256, pids_limit=100, labels={"metaopt.task_id": "t1"})
    info = docker_backend.api.inspect_container(sb.id)
    labels = info["Config"]["Labels"]
    assert labels["metaopt.managed"] == "true"
    assert labels["metaopt.run_id"] == test_run_id
    assert labels["metaopt.task_id"] == "t1"
    host = info["HostConfig"]
    assert (host["NanoCpus"], host["Memory"], host["PidsLimit"]) == (500_000_000, 256 << 20, 100)
    assert host["NetworkMode"] == "none"
    sb.close()
    with pytest.raises(docker.errors.NotFound):
        docker_backend.api.inspect_container(sb.id)


def test_memory_limit_is_enforced(make_sandbox):
    sb = make_sandbox(memory_mb=64)
    r = sb.exec("head -c 200000000 /dev/zero | tail > /dev/null", timeout=30)  # tail buffers it
    assert r.exit_code != 0


def test_container_removed_midway_raises_sandbox_error(make_sandbox, docker_backend):
    sb = make_sandbox()
    sh = sb.shell()
    docker_backend.api.remove_container(sb.id, force=True)
    with pytest.raises(SandboxError, match="gone"):
        sb.exec("true")
    with pytest.raises(SandboxError):
        sh.run("true")
    sb.close()  # still idempotent and quiet


def test_shell_exit_starts_a_new_shell_in_the_same_directory(make_sandbox):
    sh = make_sandbox().shell()
    sh.run("cd /tmp; export GONE=1")
    r = sh.run("echo bye; exit 7")
    assert (r.stdout, r.exit_code) == ("bye\n", 7)
    assert sh.run("pwd; echo ${GONE:-lost}").stdout == "/tmp\nlost\n"


def test_shell_exit_after_its_directory_is_removed_starts_in_the_workdir(make_sandbox):
    # seen with a real model: `cd /app/x`, then `rm -rf /app/x`, then `exit`
    sh = make_sandbox().shell(workdir="/root")
    sh.run("mkdir -p /tmp/gone && cd /tmp/gone")
    assert sh.run("rm -rf /tmp/gone; exit").exit_code == 0
    r = sh.run("pwd")
    assert (r.stdout, r.exit_code) == ("/root\n", 0)


def test_shell_builtin_loop_timeout_recovers(make_sandbox):
    sh = make_sandbox().shell()
    sh.run("cd /tmp")
    t0 = time.monotonic()
    r = sh.run("while :; do :; done", timeout=1)
    assert r.timed_out and time.monotonic() - t0 < 5
    assert sh.run("pwd").stdout == "/tmp\n"


def test_unreachable_daemon_is_one_clear_line(monkeypatch):
    client = docker.DockerClient(base_url="unix:///nonexistent.sock", version="1.41")
    with pytest.raises(SandboxUnavailable) as e:
        DockerBackend(client)
    msg = str(e.value)
    assert "\n" not in msg and "unix:///nonexistent.sock" in msg and "dockerd" in msg
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")
    with pytest.raises(SandboxUnavailable, match="cannot reach the Docker daemon"):
        DockerBackend()


def test_prune_is_scoped_to_a_run_id(docker_backend, test_image):
    mine, other = f"pytest-prune-{secrets.token_hex(3)}", f"pytest-prune-{secrets.token_hex(3)}"
    a = docker_backend.start(SandboxSpec(image=test_image), run_id=mine)
    b = docker_backend.start(SandboxSpec(image=test_image), run_id=other)
    try:
        assert docker_backend.prune(mine)["containers"] == 1
        with pytest.raises(SandboxError, match="gone"):
            a.exec("true")
        assert b.exec("echo alive").stdout == "alive\n"
    finally:
        assert docker_backend.prune(other)["containers"] == 1
        assert docker_backend.prune(other)["containers"] == 0


def test_start_maps_an_absent_image(docker_backend, test_image, test_run_id):
    backend = DockerBackend(docker_backend.client, ImageMap({"example.invalid/*": test_image}))
    assert backend.resolve_image(test_image) == test_image
    assert backend.resolve_image("example.invalid/x:1") == test_image
    with backend.start(SandboxSpec(image="example.invalid/x:1"), run_id=test_run_id) as sb:
        assert sb.exec("true").ok
    with pytest.raises(ImageNotFound, match="--image-map"):
        backend.resolve_image("nothing.invalid/y:2")
    with pytest.raises(ImageNotFound):
        backend.start(SandboxSpec(image="nothing.invalid/y:2"), run_id=test_run_id)


# -- image builds ---------------------------------------------------------------------------


@pytest.fixture
def build(docker_backend, test_image, built_images, tmp_path):
    """build(dockerfile_text, files={}, image_map={}) -> tag, in a fresh context directory."""
    name = f"pytest-{secrets.token_hex(4)}"

    def run(text: str, files: dict[str, str] | None = None, image_map: dict | None = None,
            context: Path | None = None) -> str:
        ctx = context or tmp_path / "ctx"
        ctx.mkdir(exist_ok=True)
        (ctx / "Dockerfile").write_text(text.replace("BASE", test_image))
        for rel, content in (files or {}).items():
            (ctx / rel).write_text(content)
        backend = DockerBackend(docker_backend.client, ImageMap(image_map or {}))
        tag = backend.build_image(ctx, name=name, timeout_s=120)
        built_images.append(tag)
        return tag

    return run


def test_build_cache_hit_and_content_change(build, docker_backend, test_run_id):
    dockerfile = "FROM BASE\nCOPY hello.txt /hello.txt\n"
    tag = build(dockerfile, {"hello.txt": "one"})
    assert tag.startswith("metaopt-task/pytest-")
    labels = docker_backend.api.inspect_image(tag)["Config"]["Labels"]
    assert labels["metaopt.managed"] == "true"
    t0 = time.monotonic()
    assert build(dockerfile, {"hello.txt": "one"}) == tag
    assert time.monotonic() - t0 < 1.0
    tag2 = build(dockerfile, {"hello.txt": "two"})
    assert tag2 != tag
    with docker_backend.start(SandboxSpec(image=tag2), run_id=test_run_id) as sb:
        assert sb.read_file("/hello.txt") == b"two"


def test_build_rewrites_unpullable_from_through_the_map(build, docker_backend, test_image,
                                                        test_run_id):
    text = (
        "ARG REGISTRY=ghcr.io/nowhere\n"
        "FROM ${REGISTRY}/unpullable:1.0 AS builder\n"
        "RUN echo built > /artifact\n"
        "FROM builder\n"
        "RUN cat /artifact > /copied\n"
    )
    tag = build(text, image_map={"ghcr.io/nowhere/*": test_image})
    with docker_backend.start(SandboxSpec(image=tag), run_id=test_run_id) as sb:
        assert sb.read_file("/copied") == b"built\n"


def test_build_with_unmapped_absent_base_raises_image_not_found(build):
    with pytest.raises(ImageNotFound) as e:
        build("FROM registry.invalid/never/there:3\nRUN true\n")
    assert "registry.invalid/never/there:3" in str(e.value) and "--image-map" in str(e.value)


def test_build_failure_names_the_step_and_shows_the_log(build):
    with pytest.raises(ImageBuildError) as e:
        build("FROM BASE\nRUN echo step-one\nRUN echo about-to-fail && exit 3\n")
    first, *rest = str(e.value).splitlines()
    assert "RUN echo about-to-fail && exit 3" in first and "3" in first
    assert any("about-to-fail" in line for line in rest)
