"""A real multi-node Ray cluster on this machine, for the tests (and perf/ray_overhead.py).

Each node is a `ray start --block` process in its own session, with its own free ports, its own
temp dir and the worktree on PYTHONPATH (so Ray workers import this checkout). Other sessions on
the machine may run Ray too: nothing here uses the default ports, /tmp/ray or `ray stop` (which
would stop every Ray process on the machine). Stopping a node sends SIGTERM to its `ray start`
(which stops its own raylet, GCS and workers), then SIGKILLs whatever of ours is left: the
node's process group and any process whose command line names our temp dir.

    with RayCluster() as cluster:
        cluster.add_node(num_cpus=1, resources={"node_b": 1})
        ... ray.init(address=cluster.address) or `--ray-address` ...
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

ROOT = Path(__file__).resolve().parents[1]
# A loopback address Ray does not rewrite (it replaces 127.0.0.1 by the host's interface address).
IP = "127.0.0.2"
OBJECT_STORE_BYTES = 80 * 2**20  # Ray's minimum is 75 MiB; results and spans are small


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _ports(n: int, taken: set[int]) -> list[int]:
    """`n` contiguous free ports in a random high range (not Ray's defaults)."""
    for _ in range(200):
        base = random.randrange(30000, 59000)
        span = range(base, base + n)
        if not taken.intersection(span) and all(_free(p) for p in span):
            taken.update(span)
            return list(span)
    raise RuntimeError(f"no {n} contiguous free ports found")


@dataclass
class RayNode:
    name: str
    proc: subprocess.Popen
    log: Path
    resources: dict = field(default_factory=dict)


class RayCluster:
    """A head node (started at construction) plus any nodes added; `stop()` ends them all."""

    def __init__(self, *, head_cpus: float = 1, head_resources: dict | None = None, timeout_s: float = 120,
                 env: dict[str, str] | None = None):
        self.tmp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: Ray's socket paths must fit
        self.timeout_s = timeout_s
        self._taken: set[int] = set()
        self.nodes: list[RayNode] = []
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                    "RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
                    "RAY_DISABLE_IMPORT_WARNING": "1", "RAY_TMPDIR_MARK": str(self.tmp)}
        self.env.update(env or {})
        self.env.pop("RAY_ADDRESS", None)
        self.port = _ports(1, self._taken)[0]
        self.address = f"{IP}:{self.port}"
        try:
            self._start("head", ["--head", "--port", str(self.port), "--include-dashboard=false",
                                 "--ray-client-server-port", str(_ports(1, self._taken)[0])],
                        head_cpus, head_resources or {})
        except BaseException:
            self.stop()
            raise

    def add_node(self, *, num_cpus: float = 1, resources: dict | None = None) -> RayNode:
        """Start one more node joined to the head; returns once the cluster sees it."""
        return self._start(f"node{len(self.nodes)}", ["--address", self.address], num_cpus, resources or {})

    def _start(self, name: str, args: list[str], num_cpus: float, resources: dict) -> RayNode:
        p = _ports(7, self._taken)
        workers = _ports(24, self._taken)
        cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", *args, "--block", "--disable-usage-stats",
               "--node-ip-address", IP, "--temp-dir", str(self.tmp), "--num-cpus", str(num_cpus),
               "--num-gpus", "0", "--resources", json.dumps(resources), "--object-store-memory", str(OBJECT_STORE_BYTES),
               "--node-manager-port", str(p[0]), "--object-manager-port", str(p[1]),
               "--dashboard-agent-listen-port", str(p[2]), "--dashboard-agent-grpc-port", str(p[3]),
               "--runtime-env-agent-port", str(p[4]), "--metrics-export-port", str(p[5]),
               "--min-worker-port", str(workers[0]), "--max-worker-port", str(workers[-1])]
        log = self.tmp / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=str(self.tmp),
                                    start_new_session=True)
        node = RayNode(name, proc, log, resources)
        self.nodes.append(node)
        self._wait_for(len(self.nodes), node)
        return node

    def _wait_for(self, n_nodes: int, node: RayNode) -> None:
        """Until `n_nodes` nodes are alive, asked through a throwaway driver process."""
        probe = ("import ray,sys; ray.init(address=sys.argv[1], logging_level='ERROR');"
                 "print(sum(n['Alive'] for n in ray.nodes()))")
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if node.proc.poll() is not None:
                raise RuntimeError(f"ray node {node.name} exited: {node.log.read_text()[-2000:]}")
            r = subprocess.run([sys.executable, "-c", probe, self.address], capture_output=True, check=False, text=True,
                               env=self.env, timeout=self.timeout_s)
            if r.returncode == 0 and r.stdout.strip().splitlines()[-1:] == [str(n_nodes)]:
                return
            time.sleep(1)
        raise RuntimeError(f"ray node {node.name} did not join in {self.timeout_s:.0f} s: {node.log.read_text()[-2000:]}")

    def stop_node(self, node: RayNode, *, grace_s: float = 20) -> None:
        """SIGTERM the node's `ray start` (it stops its raylet and workers), then SIGKILL its group."""
        if node.proc.poll() is None:
            node.proc.send_signal(signal.SIGTERM)
            try:
                node.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(node.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        node.proc.wait()

    def busy_workers(self, function: str) -> list[int]:
        """Pids of this cluster's workers running `function` now (Ray titles them `ray::NAME`)."""
        return [pid for pid, cmd in self._ours() if cmd.split()[:1] == [f"ray::{function}"]]

    def node_of(self, pid: int) -> RayNode | None:
        """The node whose `ray start` process `pid` descends from (a worker: raylet: ray start)."""
        by_pid = {n.proc.pid: n for n in self.nodes}
        while pid > 1:
            if pid in by_pid:
                return by_pid[pid]
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return None
            pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state is the parent pid
        return None

    def _ours(self) -> list[tuple[int, str]]:
        """(pid, command line) of every live process whose command line or environment names our temp dir."""
        out = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                raw = (d / "cmdline").read_bytes()
                env = (d / "environ").read_bytes()
            except OSError:
                continue
            if str(self.tmp).encode() in raw or f"RAY_TMPDIR_MARK={self.tmp}".encode() in env:
                out.append((int(d.name), raw.replace(b"\0", b" ").decode(errors="replace").strip()))
        return out

    def stop(self) -> None:
        for node in reversed(self.nodes):  # worker nodes first, the head last
            self.stop_node(node)
        for _ in range(3):  # stragglers that left our process groups (workers re-parented to init)
            left = self._ours()
            if not left:
                break
            for pid, _cmd in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
