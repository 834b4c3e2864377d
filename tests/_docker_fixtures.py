"""Docker fixtures for the sandbox tests (imported by the test modules that need them).

The test image is `metaopt-base:latest` (CI builds it before the tests) or $METAOPT_TEST_IMAGE;
tests skip, saying why, when the daemon or the image is missing. Everything a test run creates
carries its own run id, and cleanup removes only that: other runs share the daemon.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator

import docker
import docker.errors
import pytest

from metaopt.core.errors import SandboxUnavailable
from metaopt.sandbox.base import SandboxSpec
from metaopt.sandbox.docker import DockerBackend
from metaopt.sandbox.docker_sandbox import DockerSandbox

DEFAULT_TEST_IMAGE = "metaopt-base:latest"


@pytest.fixture(scope="session")
def docker_backend() -> DockerBackend:
    try:
        return DockerBackend()
    except SandboxUnavailable as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def test_image(docker_backend: DockerBackend) -> str:
    image = os.environ.get("METAOPT_TEST_IMAGE", DEFAULT_TEST_IMAGE)
    try:
        docker_backend.api.inspect_image(image)
    except docker.errors.ImageNotFound:
        pytest.skip(f"test image {image} is not present: build it with `metaopt sandbox base` "
                    f"or set METAOPT_TEST_IMAGE to a local Debian-based image")
    return image


@pytest.fixture(scope="session")
def test_run_id(docker_backend: DockerBackend) -> Iterator[str]:
    """A run id unique to this test session; its containers are pruned at the end."""
    run_id = f"pytest-sbx-{secrets.token_hex(4)}"
    yield run_id
    docker_backend.prune(run_id)


@pytest.fixture
def make_sandbox(docker_backend: DockerBackend, test_image: str, test_run_id: str
                 ) -> Iterator[Callable[..., DockerSandbox]]:
    """make_sandbox(**spec_fields) starts a sandbox of the test image; all close at teardown."""
    started: list[DockerSandbox] = []

    def make(**fields: object) -> DockerSandbox:
        spec = SandboxSpec(**{"image": test_image, **fields})  # type: ignore[arg-type]
        sb = docker_backend.start(spec, run_id=test_run_id)
        started.append(sb)
        return sb

    yield make
    for sb in started:
        sb.close()


@pytest.fixture(scope="session")
def built_images(docker_backend: DockerBackend) -> Iterator[list[str]]:
    """Tags that tests built; removed at session end (their names are unique to the session)."""
    tags: list[str] = []
    yield tags
    for tag in set(tags):
        try:
            docker_backend.api.remove_image(tag, force=True)
        except docker.errors.APIError:
            pass


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The base image's tag, once Docker answers and the image exists; skips the test otherwise.
    Depending on it (directly or through another fixture) marks a test `docker` (conftest.py)."""
    try:
        docker.from_env().images.get(DEFAULT_TEST_IMAGE)
    except Exception:  # noqa: BLE001 - whatever stops the image lookup, the test skips
        pytest.skip(f"needs a running Docker daemon and {DEFAULT_TEST_IMAGE} (scripts/setup.sh)")
    return DEFAULT_TEST_IMAGE


def metaopt(*args: str, timeout: float = 900, env: dict[str, str] | None = None, cwd=None):
    """Run the `metaopt` CLI of this checkout in a subprocess (output captured as text)."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "metaopt.cli", *args], capture_output=True, check=False, text=True,
                          timeout=timeout, env=env, cwd=cwd)
