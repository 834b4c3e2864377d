"""Test-wide settings. Real model requests are impossible here: every real client checks this
switch before any HTTP request; wire tests turn it on only for their local stand-in servers."""

import os

import pytest

# Shared fixtures live in helper modules; registering them here, rather than importing them into
# each test module, gives one definition per fixture (session-scoped ones really are per session).
pytest_plugins = ["_docker_fixtures", "_export_helpers"]

os.environ["METAOPT_ALLOW_MODEL_REQUESTS"] = "0"
for _key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
    os.environ.pop(_key, None)


@pytest.fixture(scope="module")
def local_backend(tmp_path_factory):
    """A LocalSandbox backend (chroot in its own namespaces; needs root, as the test command runs)
    for the in-process optimizer tests, pruned after the module."""
    from metaopt.sandbox.local import LocalBackend

    b = LocalBackend(tmp_path_factory.mktemp("sandboxes"))
    try:
        b.ping()
    except Exception as e:  # noqa: BLE001 - one clear line instead of a traceback per test
        pytest.fail(f"LocalSandbox cannot start here (it needs root): {e}", pytrace=False)
    yield b
    b.prune()
