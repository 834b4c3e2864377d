"""The runner's own verify-time steps in real containers: the static toolchain (stopping the
agent's processes, recreating directories), reading the container from outside (bounded reads,
docker diff, the pristine image), and the tamper scan's silence on legitimate installs."""

from __future__ import annotations

import time

import docker.errors
import pytest
from _docker_fixtures import DEFAULT_TEST_IMAGE

from metaopt.sandbox import forensics as fx
from metaopt.sandbox.base import SandboxSpec
from metaopt.sandbox.tamper import Scope, scan
from metaopt.sandbox.toolchain import Toolchain

pytestmark = pytest.mark.usefixtures("docker_image")


def _procs(sb) -> str:
    return sb.exec("for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null; echo; done").stdout


def test_stop_keeps_listening_services_and_their_children_and_kills_the_rest(make_sandbox):
    sb = make_sandbox(workdir="/app")
    sb.exec("nohup setsid python3 -c 'import socket, subprocess, time\ns = socket.socket(); s.bind((\"127.0.0.1\", 8123)); "
            "s.listen()\nsubprocess.Popen([\"sleep\", \"4100\"])\ntime.sleep(600)' >/dev/null 2>&1 < /dev/null &")
    sb.exec("for i in $(seq 1 100); do nohup sleep 4200 >/dev/null 2>&1 & done; "
            "nohup sh -c 'while true; do sleep 0.01; done' >/dev/null 2>&1 &")
    sh = sb.shell()
    sh.run("nohup sleep 4300 >/dev/null 2>&1 &")
    time.sleep(1)
    tc = Toolchain.install(sb)
    rep = tc.stop_agent_processes(keep_listeners=True)
    left = _procs(sb)
    assert "8123" in left and "sleep 4100" in left  # the service and its child
    assert "sleep 4200" not in left and "sleep 4300" not in left and "while true" not in left
    assert [k["cmdline"][:7] for k in rep.kept] .count("python3") == 1 and rep.killed >= 102 and not rep.left
    tc.stop_agent_processes(keep_listeners=False)
    assert "8123" not in _procs(sb) and sb.exec("echo alive").stdout == "alive\n"


def test_toolchain_works_whatever_the_agent_did_to_the_image_tools(make_sandbox):
    sb = make_sandbox(workdir="/app")
    sb.exec("printf '#!/bin/sh\\nexit 0\\n' > /tmp/noop; chmod +x /tmp/noop; for t in rm mkdir kill sh; do "
            "cp /tmp/noop /usr/local/bin/$t; done; echo /nonexistent.so > /etc/ld.so.preload")
    sb.exec("mkdir -p /tests/x && echo 1 > /tests/x/conftest.py; rm -rf /logs; ln -s /tmp /logs; mkfifo /tmp/verifier")
    tc = Toolchain.install(sb)
    tc.fresh_dirs(["/tests", "/logs/verifier"])
    assert fx.read_entry(sb, "/logs").kind == "dir" and fx.read_entry(sb, "/tmp/verifier").kind == "fifo"
    assert fx.read_tree(sb, "/tests") == ({"": fx.read_entry(sb, "/tests")}, True) or fx.read_tree(sb, "/tests")[0].keys() == {""}
    r = sb.exec("sleep 30", timeout=1)  # the timeout wrapper and kill run under the toolchain's own sh
    assert r.timed_out and r.duration_s < 10


def test_reads_from_outside_are_bounded_and_never_raise_for_what_a_path_is(make_sandbox):
    sb = make_sandbox(workdir="/app")
    sb.exec("mkfifo /app/fifo; mkdir /app/dir; ln -s /etc/passwd /app/link; head -c 50000000 /dev/zero > /app/big; echo hi > /app/small")
    t0 = time.monotonic()
    kinds = {p: fx.read_entry(sb, f"/app/{p}", limit=1000, hash_limit=1 << 20) for p in ("fifo", "dir", "link", "big", "small", "none")}
    assert time.monotonic() - t0 < 20
    assert {p: e.kind for p, e in kinds.items()} == {"fifo": "fifo", "dir": "dir", "link": "link", "big": "file",
                                                     "small": "file", "none": "missing"}
    assert kinds["big"].data is None and kinds["big"].sha256 is None and kinds["small"].data == b"hi\n"
    assert kinds["link"].link == "/etc/passwd"
    changed = {p: k for k, p in fx.changes(sb)}
    assert changed["/app/small"] == "A"


def test_apt_fails_fast_offline_through_the_toolchain_config(make_sandbox):
    """Offline, apt's default retries make `apt-get update` sit ~7 s; the verifier gets
    APT_CONFIG pointing at the toolchain's config (timing figures: README)."""
    sb = make_sandbox(workdir="/app")
    sb.exec("rm -f /etc/apt/apt.conf.d/99metaopt")  # an image without metaopt's own apt config
    tc = Toolchain.install(sb)
    env = {"APT_CONFIG": f"{tc.root}/apt-offline.conf"}
    assert 'Acquire::Retries "0";' in sb.exec("apt-config dump", env=env).stdout
    assert 'Acquire::Retries "0";' not in sb.exec("apt-config dump").stdout


def test_legitimate_installs_are_not_tampering(make_sandbox):
    """pip installing the offline pytest (it shadows Debian's), an editable install, a new tool on
    PATH, a package built and installed with dpkg: none is evidence."""
    sb = make_sandbox(workdir="/app")
    r = sb.exec("""set -e
pip install -q pytest==8.4.1 2>&1 | tail -1
mkdir -p /app/pkg/src/mo_pkg && printf '[project]\\nname = "mo-pkg"\\nversion = "0.1"\\n[tool.setuptools.packages.find]\\nwhere = ["src"]\\n' > /app/pkg/pyproject.toml
echo 'X = 1' > /app/pkg/src/mo_pkg/__init__.py
pip install -q --no-build-isolation -e /app/pkg 2>&1 | tail -1
printf '#!/bin/sh\\necho hi\\n' > /usr/local/bin/mo-hello && chmod +x /usr/local/bin/mo-hello
mkdir -p /tmp/deb/DEBIAN /tmp/deb/usr/bin && printf 'Package: mo-tool\\nVersion: 1.0\\nArchitecture: all\\nMaintainer: x <x@y>\\nDescription: x\\n' > /tmp/deb/DEBIAN/control
printf '#!/bin/sh\\necho tool\\n' > /tmp/deb/usr/bin/mo-tool && chmod +x /tmp/deb/usr/bin/mo-tool
dpkg-deb --build /tmp/deb /tmp/mo.deb > /dev/null && dpkg -i /tmp/mo.deb > /dev/null
python3 -c 'import mo_pkg, pytest; print(pytest.__version__)'
""", timeout=300)
    assert r.ok and r.stdout.strip().endswith("8.4.1"), r.stdout + r.stderr
    res = scan(sb, Scope(workdir="/app"))
    assert res.evidence == [], [e.to_json() for e in res.evidence]
    assert res.n_changes > 100 and any(p.endswith(".pyc") for p in res.neutralize)


def test_a_tasks_own_tool_on_path_is_the_agents_to_fix_but_a_distribution_tool_is_not(docker_backend, tmp_path,
                                                                                     built_images, test_run_id):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "backup.sh").write_text("#!/bin/sh\nexit 1  # broken: the task asks for a fix\n")
    (ctx / "Dockerfile").write_text(f"FROM {DEFAULT_TEST_IMAGE}\nCOPY backup.sh /usr/local/bin/mo-backup\nWORKDIR /app\n")
    image = docker_backend.build_image(ctx, name=f"pytest-tool-{test_run_id}")
    built_images.append(image)
    with docker_backend.start(SandboxSpec(image=image, workdir="/app"), run_id=test_run_id) as sb:
        sb.exec("printf '#!/bin/sh\\necho backed up\\n' > /usr/local/bin/mo-backup")
        assert scan(sb, Scope(workdir="/app")).evidence == []
        sb.exec("printf '#!/bin/sh\\necho 1.0\\n' >> /usr/bin/sort")  # a distribution tool the test scripts run
        assert [e.rule for e in scan(sb, Scope(workdir="/app")).evidence] == ["verifier-tool-replaced"]


def test_the_verifiers_fresh_container_shares_no_process_with_the_agents(docker_backend, make_sandbox, test_run_id):
    """sandbox.docker_fork: the verifier's container holds the agent's files as they were at the
    capture and none of its processes; its main process is the runner's static busybox; a
    service kept for the tests is reachable over localhost but cannot touch the verifier's files;
    closing it removes the snapshot image."""
    from metaopt.sandbox.docker_fork import fork

    sb = make_sandbox(workdir="/app", labels={"metaopt.test": "fork"})
    sb.exec("mkdir -p /app && echo kept > /app/f && nohup setsid python3 -c 'import socket, time, pathlib\n"
            "s = socket.socket(); s.bind((\"127.0.0.1\", 8125)); s.listen()\n"
            "while True:\n    c, _ = s.accept(); pathlib.Path(\"/app/late\").write_text(\"x\"); c.sendall(b\"pong\"); c.close()' "
            ">/dev/null 2>&1 < /dev/null & sleep 0.5")
    kept = fork(docker_backend, sb, keep_running=True, run_id=test_run_id)
    try:
        v = kept.sb
        assert v.exec("cat /app/f").stdout == "kept\n" and ("C", "/app") in kept.changes
        main = v.exec(["sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'"]).stdout
        assert main.startswith("/sbin/docker-init") and "python3" not in _procs(v) and "/.metaopt-" in _procs(v)
        got = v.exec(["python3", "-c", "import socket; s = socket.create_connection(('127.0.0.1', 8125)); print(s.recv(4).decode())"])
        assert got.stdout.strip() == "pong", got  # the service answered, and wrote /app/late: in its own container only
        assert sb.exec("test -e /app/late").ok and not v.exec("test -e /app/late").ok
    finally:
        kept.close()
    with pytest.raises(docker.errors.ImageNotFound):
        docker_backend.api.inspect_image(kept.image)
    killed = fork(docker_backend, sb, keep_running=False, run_id=test_run_id)
    try:
        assert not docker_backend.api.inspect_container(sb.id)["State"]["Running"]
        assert killed.sb.exec("cat /app/late").stdout == "x" and killed.report["agent_container"] == "killed"
    finally:
        killed.close()


def test_a_flood_of_files_costs_the_scan_no_per_file_reads_and_its_time_is_bounded(make_sandbox, monkeypatch):
    """Deliver 6 of issue 24: how many files the agent changes must not set the scan's cost (a
    pentest stretched one scan to 455 s): new names on PATH that shadow no tool and files no rule
    names are not read one by one; past its time budget the scan stops, and the trial is tampered."""
    from metaopt.sandbox import tamper

    sb = make_sandbox(workdir="/app")
    code = ("import os\nfor d in ('/usr/local/bin', '/app/flood', '/opt/flood'):\n"
            "    os.makedirs(d, exist_ok=True)\n    for i in range(1500):\n        open(f'{d}/f{i}.py', 'w').write('x = 1')")
    made = sb.exec(["python3", "-c", code])
    assert made.ok, made.stderr
    reads = []
    real = fx.read_entry
    monkeypatch.setattr(fx, "read_entry", lambda *a, **k: reads.append(a[1]) or real(*a, **k))
    res = scan(sb, Scope(workdir="/app"))
    assert res.n_changes > 4500 and not res.evidence and len(reads) < 500, (len(reads), res.evidence[:3])
    monkeypatch.setattr(tamper, "SCAN_BUDGET_S", -1.0)
    res = scan(sb, Scope(workdir="/app"))
    assert [e.rule for e in res.evidence] == ["scan-exhausted"]
