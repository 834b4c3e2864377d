"""inspect-ai's own conformance suite for sandbox environments, run against our Docker sandbox as
the inspect sandbox `metaopt` (sandbox/inspect_env.py). Checks our sandbox cannot meet are xfailed
by name below, each with the reason."""

import pytest

pytest.importorskip("inspect_ai")

from _docker_fixtures import DEFAULT_TEST_IMAGE
from inspect_ai.util._sandbox.self_check import *

from metaopt.sandbox.base import SandboxSpec

pytestmark = [pytest.mark.usefixtures("docker_image"), pytest.mark.anyio]

ROOT = "the sandbox's default user is root, whom file permission bits do not stop"
KNOWN_GAPS: dict[str, str] = {
    "test_read_file_not_allowed": ROOT,
    "test_write_text_file_without_permissions": ROOT,
    "test_write_binary_file_without_permissions": ROOT,
}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def container(docker_image, docker_backend, test_run_id):
    sb = docker_backend.start(SandboxSpec(image=DEFAULT_TEST_IMAGE, workdir="/app"), run_id=test_run_id)
    sb.exec("mkdir -p /app && useradd -m nonroot", user="root")
    yield sb
    sb.close()


@pytest.fixture
def sandbox_env(request, container):
    from metaopt.sandbox.inspect_env import MetaoptSandboxEnvironment

    why = KNOWN_GAPS.get(request.node.originalname)
    if why:
        request.applymarker(pytest.mark.xfail(reason=why, strict=True))
    return MetaoptSandboxEnvironment(container, "/app")
