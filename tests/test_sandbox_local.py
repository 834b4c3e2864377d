"""LocalSandbox runs the Sandbox conformance suite (the parts that apply: no resource limits, no
image builds), plus what is particular to it: isolation of paths, no network, cleanup."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sandbox_conformance import SandboxConformance

from metaopt.sandbox.base import SandboxSpec
from metaopt.sandbox.local import HOST_IMAGE, LocalBackend


@pytest.fixture(scope="module")
def local_backend(tmp_path_factory):
    backend = LocalBackend(tmp_path_factory.mktemp("local"))
    backend.ping()
    yield backend
    backend.prune()


class TestLocalSandbox(SandboxConformance):
    @pytest.fixture
    def make_sandbox(self, local_backend):
        started = []

        def make(**fields):
            sb = local_backend.start(SandboxSpec(image=HOST_IMAGE, **fields), run_id="pytest-local")
            started.append(sb)
            return sb

        yield make
        for sb in started:
            sb.close()


def test_paths_are_the_sandboxes_own(local_backend):
    spec = SandboxSpec(image=HOST_IMAGE, workdir="/app")
    with local_backend.start(spec, run_id="pytest-local") as a, local_backend.start(spec, run_id="pytest-local") as b:
        a.exec("echo from-a > /app/out.txt; echo t > /tmp/t")
        assert a.read_file("/app/out.txt") == b"from-a\n"
        assert b.exec("cat /app/out.txt /tmp/t").exit_code != 0  # b sees its own /app and /tmp
        assert not __import__("os").path.exists("/app/out.txt")  # nor does the host
        r = a.exec("touch /usr/bin/metaopt-should-not-exist")
        assert r.exit_code != 0 and "Read-only" in r.stderr


def test_no_network_unless_asked(local_backend):
    probe = "python3 -c 'import socket; s = socket.socket(); s.settimeout(3); s.connect((\"10.255.255.1\", 80))'"
    with local_backend.start(SandboxSpec(image=HOST_IMAGE), run_id="pytest-local") as sb:
        r = sb.exec(probe, timeout=10)
        assert r.exit_code != 0 and "unreachable" in r.stderr.lower()
        assert sb.exec("cat /sys/class/net/*/operstate 2>/dev/null; ls /proc/net/dev").ok


def _host_pids(cmdline: bytes) -> list[str]:
    out = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and Path(f"/proc/{d}/cmdline").read_bytes() == cmdline:
                out.append(d)
        except OSError:
            pass
    return out


def test_close_kills_every_process_inside_and_deletes_the_root(local_backend):
    sb = local_backend.start(SandboxSpec(image=HOST_IMAGE), run_id="pytest-local-close")
    sh = sb.shell()
    sh.run("sleep 1007 > /dev/null 2>&1 &")
    sb.exec("setsid sh -c 'sleep 1008 > /dev/null 2>&1 &' > /dev/null 2>&1")  # escapes its session
    time.sleep(0.2)
    assert _host_pids(b"sleep\x001007\x00") and _host_pids(b"sleep\x001008\x00")
    root = sb.root
    assert local_backend.prune("pytest-local-close") == {"sandboxes": 1}
    assert not root.exists()
    for _ in range(50):
        if not _host_pids(b"sleep\x001007\x00") and not _host_pids(b"sleep\x001008\x00"):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("a process outlived its sandbox")
