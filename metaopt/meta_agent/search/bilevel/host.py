"""Where a mechanism's hooks run. Generated code never runs in the optimizer's process: it goes to
a long-lived host (meta_agent/search/mechanisms/host_main.py) in a child process or a container, spoken
to in JSON lines, with a timeout per call. Built-in mechanisms are trusted and run in process,
but through the same interface: JSON in, JSON out, the same output checks.

    host = ProcessHost(source)            # or DockerHost(source, backend, run_id), BuiltinHost("tabu")
    reply = host.call("guidance", ctx, timeout=2.0)   # Reply(status, value, error, ms)
    host.close()

Reply.status: ok | raised (the hook raised) | timeout (killed: the host is dead from then on) |
garbage (a value outside the protocol's shapes) | dead (the host is gone). A host never raises
for what the mechanism does; HostStartError only when the host itself cannot start.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import resource
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from metaopt.core.errors import HostStartError, SandboxError
from metaopt.meta_agent.search.mechanisms import host_source
from metaopt.meta_agent.search.mechanisms.protocol import HOOKS, check_output

if TYPE_CHECKING:
    from metaopt.sandbox.docker import DockerBackend

MAX_LINE = 1 << 20
NOBODY = 65534
CLONE_NEWNET = 0x40000000


@dataclass(frozen=True)
class Reply:
    status: Literal["ok", "raised", "timeout", "garbage", "dead"]
    value: Any = None
    error: str | None = None
    ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _Host:
    """JSON lines over a transport (subclasses: _send, _recv_line(deadline), _kill)."""

    isolation = ""

    def __init__(self, start_timeout: float) -> None:
        self.dead: str | None = None
        self._n = 0
        self._buf = b""
        line = self._recv_line(time.monotonic() + start_timeout)
        hello = _decode(line)
        if not isinstance(hello, dict) or not hello.get("ready"):
            why = hello.get("error") if isinstance(hello, dict) else "no answer"
            self._kill()
            raise HostStartError(f"the mechanism did not load: {why}")
        self.info: dict[str, Any] = hello["info"]

    def call(self, hook: str, *args: Any, timeout: float = 2.0, offered: list[str] | None = None) -> Reply:
        if self.dead:
            return Reply("dead", error=self.dead)
        self._n += 1
        t0 = time.monotonic()
        try:
            self._send((json.dumps({"id": self._n, "hook": hook, "args": list(args)}) + "\n").encode())
        except (OSError, SandboxError) as e:
            return self._die(f"the host is gone ({e})", t0, "dead")
        line = self._recv_line(t0 + timeout)
        if line is None:
            return self._die(f"{hook}() did not return within {timeout:g} s", t0, "timeout")
        msg = _decode(line)
        ms = (time.monotonic() - t0) * 1000
        if not isinstance(msg, dict) or msg.get("id") != self._n:
            return self._die(f"the host answered out of protocol: {line[:200]!r}", t0, "dead")
        if not msg.get("ok"):
            return Reply("raised", error=str(msg.get("error"))[:2000], ms=ms)
        value = msg.get("value")
        problem = check_output(hook, value, offered) if hook in HOOKS else None
        return Reply("garbage", value, problem, ms) if problem else Reply("ok", value, None, ms)

    def coverage(self) -> list[str]:
        r = self.call("__coverage__")
        return list(r.value) if r.ok and isinstance(r.value, list) else []

    def _die(self, why: str, t0: float, status: str) -> Reply:
        self.dead = why
        self._kill()
        return Reply(status, error=why, ms=(time.monotonic() - t0) * 1000)  # type: ignore[arg-type]

    def close(self) -> None:
        if not self.dead:
            self.dead = "closed"
        self._kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------------
    def _take_line(self) -> bytes | None:
        at = self._buf.find(b"\n")
        if at < 0:
            if len(self._buf) > MAX_LINE:
                self._buf = b""
                return b"{}"  # an oversized answer is out of protocol
            return None
        line, self._buf = self._buf[:at], self._buf[at + 1:]
        return line

    def _send(self, data: bytes) -> None: ...
    def _recv_line(self, deadline: float) -> bytes | None: ...
    def _kill(self) -> None: ...


class ProcessHost(_Host):
    """The host in a child process: `python3 -I -S` (no site, no user paths), as user nobody in
    a network namespace of its own when run as root, with address-space, CPU-time, file-size
    and open-file limits."""

    def __init__(self, source: str, *, memory_mb: int = 512, cpu_s: int = 600, start_timeout: float = 20.0):
        self._dir = Path(tempfile.mkdtemp(prefix="metaopt-mech-"))
        os.chmod(self._dir, 0o755)
        (self._dir / "host_main.py").write_text(host_source(), encoding="utf-8")
        (self._dir / "mechanism.py").write_text(source, encoding="utf-8")
        python, root = _python_for_nobody()
        self.isolation = (f"process (user nobody, own network namespace, {memory_mb} MiB, {cpu_s} CPU-s)" if root
                          else f"process ({memory_mb} MiB, {cpu_s} CPU-s; shares this user and the network: "
                               f"{'not root' if os.geteuid() else 'no python3 that user nobody can run'})")

        libc = ctypes.CDLL(None, use_errno=True) if root else None  # loaded here: no dlopen in the forked child

        def limits() -> None:  # in the child, before exec
            mem = memory_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
            resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if libc is not None:
                if libc.unshare(CLONE_NEWNET) != 0:
                    os._exit(97)
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)

        self._proc = subprocess.Popen(
            [python, "-I", "-S", str(self._dir / "host_main.py"), str(self._dir / "mechanism.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=self._dir, env={},
            preexec_fn=limits, close_fds=True)  # noqa: PLW1509 - rlimits and user need a hook; it only makes syscalls
        super().__init__(start_timeout)

    def _send(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)
        self._proc.stdin.flush()

    def _recv_line(self, deadline: float) -> bytes | None:
        fd = self._proc.stdout.fileno()  # type: ignore[union-attr]
        while (line := self._take_line()) is None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""  # EOF: the host exited
            self._buf += chunk
        return line

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for f in (self._proc.stdin, self._proc.stdout):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass
        for p in self._dir.glob("*"):
            p.unlink(missing_ok=True)
        self._dir.rmdir() if self._dir.exists() else None


class DockerHost(_Host):
    """The host in a container of its own: metaopt-base (python3), no network, 0.5 CPU, 256 MiB,
    16 processes, user nobody, labelled with the experiment's run id (pruned with it)."""

    def __init__(self, source: str, backend: DockerBackend, run_id: str, *, image: str = "metaopt-base:latest",
                 memory_mb: int = 256, cpus: float = 0.5, start_timeout: float = 60.0):
        from metaopt.sandbox.base import SandboxSpec

        self.isolation = f"docker ({image}, no network, {cpus:g} CPU, {memory_mb} MiB, 16 pids, user nobody)"
        self._sbx = backend.start(SandboxSpec(image=image, network=False, cpus=cpus, memory_mb=memory_mb,
                                              pids_limit=16, labels={"metaopt.role": "mechanism-host"}),
                                  run_id=run_id)
        try:
            self._sbx.write_file("/mech/host_main.py", host_source())
            self._sbx.write_file("/mech/mechanism.py", source)
            _, self._stream = self._sbx._start_exec(
                ["python3", "-I", "-S", "/mech/host_main.py", "/mech/mechanism.py"],
                user=f"{NOBODY}:{NOBODY}", workdir="/mech", stdin=True)
        except BaseException:
            self._sbx.close()
            raise
        self._seen = 0
        super().__init__(start_timeout)

    def _send(self, data: bytes) -> None:
        self._stream.send(data)

    def _recv_line(self, deadline: float) -> bytes | None:
        while (line := self._take_line()) is None:
            if self._stream.eof:
                return b""
            if not self._stream.pump(deadline):
                return None
            self._buf += bytes(self._stream.stdout[self._seen:])
            self._seen = len(self._stream.stdout)
        return line

    def _kill(self) -> None:
        try:
            self._stream.close()
        except (OSError, AttributeError):
            pass
        self._sbx.close()


class BuiltinHost:
    """A built-in mechanism (trusted code), in process but with JSON copies in and out and the
    same output checks, so it never sees a live object either."""

    isolation = "in process (built-in)"

    def __init__(self, name: str):
        from metaopt.meta_agent.search.mechanisms import MECHANISMS

        self._cls = MECHANISMS.load(name)
        self._obj = self._cls()
        self.dead: str | None = None
        self.info = {"name": self._cls.name, "hooks": [h for h in HOOKS if callable(self._cls.__dict__.get(h))]}

    def call(self, hook: str, *args: Any, timeout: float = 2.0, offered: list[str] | None = None) -> Reply:
        if self.dead:
            return Reply("dead", error=self.dead)
        t0 = time.monotonic()
        try:
            if hook == "__reset__":
                self._obj = self._cls()
                return Reply("ok")
            call_args = json.loads(json.dumps(list(args)))
            if hook == "select_parent":
                call_args = [call_args[0], random.Random(int(call_args[1]["seed"]))]
            value = json.loads(json.dumps(getattr(self._obj, hook)(*call_args)))
        except Exception as e:  # noqa: BLE001 - a raising hook is a reply
            return Reply("raised", error=f"{type(e).__name__}: {e}", ms=(time.monotonic() - t0) * 1000)
        problem = check_output(hook, value, offered)
        ms = (time.monotonic() - t0) * 1000
        return Reply("garbage", value, problem, ms) if problem else Reply("ok", value, None, ms)

    def coverage(self) -> list[str]:
        return []

    def close(self) -> None:
        self.dead = self.dead or "closed"


def _python_for_nobody() -> tuple[str, bool]:
    """(interpreter, drop to nobody): as root, a python3 that user nobody can run (this one may
    live under /root), else this one without dropping privileges."""
    if os.geteuid() != 0:
        return sys.executable, False
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        path = Path(candidate).resolve()
        if path.exists() and all(p.stat().st_mode & 0o001 for p in [path, *path.parents]):
            return str(path), True
    return sys.executable, False


def _decode(line: bytes | None) -> Any:
    if not line:
        return None
    try:
        return json.loads(line)
    except ValueError:
        return None
