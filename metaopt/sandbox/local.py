"""LocalSandbox: the Sandbox protocol without Docker, for fast tests of the agent loop, the
optimizer and the gate. NOT a security boundary: never run untrusted code in it.

Each sandbox is a fresh temporary directory used as the root of a chroot, inside its own mount,
pid and (unless the spec asks for network) network namespaces, made once when it starts; every
exec and shell joins them (nsenter) and chroots into the directory. The host's /usr, /bin,
/lib*, /sbin and /etc are bind-mounted read-only, /dev holds only null, zero, full, random,
urandom and tty, /proc shows the sandbox's own processes, and everything else (/tmp, /app,
/tests, /logs, ...) is the sandbox's own and is deleted at close, when every process inside is
killed with the namespace. Commands see absolute paths as in a container, so task files copied
to /tests or rewards read from /logs/verifier work unchanged. What a task's Dockerfile would add
is not there: LocalBackend only has the image `host` (the host's own programs).

Differences from DockerSandbox: no cpu, memory or pids limits; no image builds; root on the host
is required (namespaces); it shares the host's kernel and, read-only, its programs and /etc.
"""

from __future__ import annotations

import io
import os
import posixpath
import secrets
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

from metaopt.core.errors import ImageBuildError, ImageNotFound, SandboxError, SandboxUnavailable
from metaopt.sandbox.base import ExecResult, SandboxSpec
from metaopt.sandbox.images import root_owned, strip_top, tar_of
from metaopt.sandbox.pipes import PipeStream, children, kill_tree, send_signal
from metaopt.sandbox.shell import KILL_TREE, TIMEOUT_EXIT_CODE, DockerShell

HOST_IMAGE = "host"
READ_ONLY = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The sandbox's init, run once as `unshare --mount --pid --fork [--net] sh -c INIT sh ROOT`: pid 1
# of a new pid namespace, in a new mount namespace where the read-only host dirs, /dev and a
# /proc of the new pid namespace are mounted into ROOT. It prints "ready" and sleeps; every exec
# joins its namespaces with nsenter and chroots into ROOT. Killing it ends every process inside.
_INIT = r"""
set -e
R=$1
for d in {ro}; do
  [ -d "/$d" ] && [ ! -L "/$d" ] || continue
  mount --rbind "/$d" "$R/$d"; mount -o remount,bind,ro "$R/$d"
done
mount -t tmpfs -o mode=755,size=1m tmpfs "$R/dev"
for n in {dev}; do [ -e "/dev/$n" ] && : > "$R/dev/$n" && mount --bind "/dev/$n" "$R/dev/$n"; done
mkdir -p "$R/dev/shm" && mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
ln -s /proc/self/fd "$R/dev/fd"; ln -s /proc/self/fd/0 "$R/dev/stdin"
ln -s /proc/self/fd/1 "$R/dev/stdout"; ln -s /proc/self/fd/2 "$R/dev/stderr"
mount -t proc proc "$R/proc"
echo ready
exec sleep infinity
""".format(ro=" ".join(READ_ONLY), dev=" ".join(DEVICES))

# Inside the chroot: `sh -c ENTER sh WORKDIR ENV... ARGV...`.
_ENTER = 'cd "$1" || exit 125; shift; exec /usr/bin/env -i "$@"'


class LocalBackend:
    """Starts LocalSandboxes; the same surface as DockerBackend where the trial runner uses it."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root or tempfile.gettempdir()) / "metaopt-local"
        self._runs: dict[str, list[LocalSandbox]] = {}
        self._lock = threading.Lock()

    def ping(self) -> None:
        """Raise SandboxUnavailable unless mount and pid namespaces and chroot work here."""
        if os.geteuid() != 0:
            raise SandboxUnavailable("LocalSandbox needs root (it makes mount and pid namespaces); use DockerBackend")
        try:
            with self.start(SandboxSpec(image=HOST_IMAGE), run_id="ping") as sb:
                r = sb.exec(["true"])
        except SandboxError as e:
            raise SandboxUnavailable(f"LocalSandbox cannot start here: {e}") from None
        if not r.ok:
            raise SandboxUnavailable(f"LocalSandbox cannot run commands here: {r.stderr.strip()[-300:]}")

    def resolve_image(self, ref: str) -> str:
        if ref != HOST_IMAGE:
            raise ImageNotFound(f"LocalBackend runs only the image '{HOST_IMAGE}' (the host's own files), not {ref!r}")
        return ref

    def build_image(self, context_dir: Path, dockerfile: str = "Dockerfile", *, name: str, **_: Any) -> str:
        raise ImageBuildError(f"LocalBackend cannot build {context_dir / dockerfile}: it has no image builder "
                              f"(use image '{HOST_IMAGE}', or DockerBackend)")

    def image_workdir(self, image: str) -> str | None:
        return None

    def start(self, spec: SandboxSpec, *, run_id: str) -> LocalSandbox:
        self.root.mkdir(parents=True, exist_ok=True)
        sb = LocalSandbox(spec, Path(tempfile.mkdtemp(prefix=f"{_safe(run_id)}-", dir=self.root)))
        with self._lock:
            self._runs.setdefault(run_id, []).append(sb)
        return sb

    def prune(self, run_id: str | None = None, *, images: bool = False) -> dict[str, int]:
        with self._lock:
            runs = [run_id] if run_id is not None else list(self._runs)
            boxes = [sb for r in runs for sb in self._runs.pop(r, [])]
        live = [sb for sb in boxes if not sb.closed]
        for sb in live:
            sb.close()
        return {"sandboxes": len(live)}


class LocalSandbox:
    """One chroot in a temporary directory. Implements sandbox.base.Sandbox (see module docstring)."""

    def __init__(self, spec: SandboxSpec, root: Path):
        self.spec, self.root = spec, root
        self.closed = False
        self._procs: set[subprocess.Popen] = set()
        self._shells: list[DockerShell] = []
        for d in (*READ_ONLY, "dev", "proc", "root", "tmp"):
            src = Path("/") / d
            if src.is_symlink():
                (root / d).symlink_to(os.readlink(src))
            elif d not in READ_ONLY or src.is_dir():
                (root / d).mkdir(exist_ok=True)
        root.chmod(0o755)  # mkdtemp's 0700 would keep other users out of their own /
        (root / "tmp").chmod(0o1777)
        (root / spec.workdir.lstrip("/")).mkdir(parents=True, exist_ok=True)
        ns = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork"]
        self._ns_flags = ["--mount", "--pid"]
        if not spec.network:
            ns.append("--net")
            self._ns_flags.append("--net")
        self._init = subprocess.Popen([*ns, "/bin/sh", "-c", _INIT, "sh", str(root)], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        assert self._init.stdout is not None and self._init.stderr is not None  # both are PIPE
        ready = self._init.stdout.readline()
        if ready.strip() != b"ready":
            err = self._init.stderr.read().decode(errors="replace").strip()[-300:]
            self._init.kill()
            _remove_tree(root)
            raise SandboxError(f"LocalSandbox could not set up its namespaces: {err or 'no output'}")
        self._ns_pid = self._ns_child()

    # -- the protocol ----------------------------------------------------------------------
    def exec(self, cmd: str | list[str], *, timeout: float | None = None, workdir: str | None = None,
             env: dict[str, str] | None = None, user: str | None = None) -> ExecResult:
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else [str(a) for a in cmd]
        t0 = time.monotonic()
        rc, out, err, timed_out = self._run(argv, user=user, workdir=workdir, env=env, timeout=timeout)
        return ExecResult(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), rc, timed_out,
                          time.monotonic() - t0)

    def shell(self, *, user: str | None = None, workdir: str | None = None) -> DockerShell:
        sh = DockerShell(self, user=user, workdir=workdir)  # the shell protocol works over any stream
        self._shells.append(sh)
        return sh

    def read_file(self, path: str) -> bytes:
        rc, out, err, _ = self._run(["sh", "-c", 'test -d "$1" && exit 21; test -e "$1" || exit 2; cat "$1"',
                                     "sh", self._abs(path)], user="root")
        if rc == 2:
            raise FileNotFoundError(2, "no such file in the sandbox", path)
        if rc == 21:
            raise IsADirectoryError(21, "is a directory in the sandbox", path)
        if rc:
            raise SandboxError(f"cannot read {path}: {err.decode(errors='replace').strip()[-300:]}")
        return out

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        info = tarfile.TarInfo(posixpath.basename(self._abs(path)))
        info.size, info.mode, info.mtime = len(raw), mode, int(time.time())
        self._untar(posixpath.dirname(self._abs(path)), tar_of([(info, io.BytesIO(raw))]))

    def copy_in(self, src: Path, dest: str) -> None:
        src, dest = Path(src), self._abs(dest)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            if src.is_dir():
                for child in sorted(src.iterdir()):
                    tar.add(child, arcname=child.name, filter=root_owned)
            else:
                tar.add(src, arcname=posixpath.basename(dest), filter=root_owned)  # FileNotFoundError
        self._untar(dest if src.is_dir() else posixpath.dirname(dest), buf.getvalue())

    def copy_out(self, src: str, dest: Path) -> None:
        path = self._abs(src)
        rc, out, err, _ = self._run(["sh", "-c", ('test -e "$1" || exit 2; cd "$(dirname "$1")" && '
                                     'tar -c -h "$(basename "$1")"'), "sh", path], user="root")
        if rc == 2:
            raise FileNotFoundError(2, "no such file in the sandbox", src)
        if rc:
            raise SandboxError(f"cannot copy {src} out: {err.decode(errors='replace').strip()[-300:]}")
        dest = Path(dest)
        with tarfile.open(fileobj=io.BytesIO(out)) as tar:
            top = tar.next()
            if top is not None and top.isdir():
                dest.mkdir(parents=True, exist_ok=True)
                tar.extractall(dest, filter=strip_top(top.name))
                return
            dest.parent.mkdir(parents=True, exist_ok=True)
            member = tar.extractfile(top) if top is not None else None
            if top is None or member is None:
                raise SandboxError(f"cannot copy {src} out: not a regular file or directory")
            with member as f, dest.open("wb") as fh:
                shutil.copyfileobj(f, fh)
            dest.chmod(top.mode & 0o777)

    def close(self) -> None:
        """Kill every process the sandbox started and delete its directory. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for sh in self._shells:
            sh.close()
        send_signal(self._ns_pid, signal.SIGKILL)  # pid 1 of the namespace: the kernel kills everything inside
        self._init.kill()
        self._init.wait()
        for p in list(self._procs):
            if p.poll() is None:
                p.kill()
            p.wait()
        _remove_tree(self.root)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what DockerShell needs ------------------------------------------------------------
    def _start_exec(self, argv: list[str], *, user: str | None, workdir: str | None,
                    env: dict[str, str] | None = None, stdin: bool = False) -> tuple[subprocess.Popen, PipeStream]:
        p = self._popen(argv, user=user, workdir=workdir, env=env)
        return p, PipeStream(p)

    def _exit_code(self, proc: subprocess.Popen) -> int:
        return proc.wait()

    def _kill_tree(self, root: str, *, with_root: bool, spare: list[str] | None = None) -> None:
        """Kill a tree of the sandbox's own pids (as its shells see them), from inside."""
        self._run(["sh", "-c", KILL_TREE, "sh", root, str(int(with_root)), " ".join(spare or [])], user="root")

    def _ns_child(self) -> int:
        """The host pid of the namespace's pid 1 (the child `unshare --fork` started)."""
        for _ in range(100):
            kids = children().get(self._init.pid, [])
            if kids:
                return kids[0]
            time.sleep(0.01)
        raise SandboxError("LocalSandbox: the namespace's init did not start")

    # -- internals -------------------------------------------------------------------------
    def _abs(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.spec.workdir, path))

    def _popen(self, argv: list[str], *, user: str | None, workdir: str | None,
               env: dict[str, str] | None) -> subprocess.Popen:
        if self.closed:
            raise SandboxError("this sandbox is closed")
        user = user if user is not None else self.spec.user
        full_env = {"PATH": PATH, "HOME": _home(user), "LANG": "C.UTF-8", **self.spec.env, **(env or {})}
        as_user = [] if user in (None, "", "root", "0") else [f"--userspec={user}"]
        wd = self._abs(workdir) if workdir else self.spec.workdir
        p = subprocess.Popen(["nsenter", f"--target={self._ns_pid}", *self._ns_flags, "--", "chroot", *as_user,
                              str(self.root), "/bin/sh", "-c", _ENTER, "sh", wd,
                              *(f"{k}={v}" for k, v in full_env.items()), *argv],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        self._procs.add(p)
        return p

    def _run(self, argv: list[str], *, user: str | None = None, workdir: str | None = None,
             env: dict[str, str] | None = None, timeout: float | None = None,
             data: bytes = b"") -> tuple[int, bytes, bytes, bool]:
        p = self._popen(argv, user=user, workdir=workdir, env=env)
        stream = PipeStream(p)
        try:
            if data:
                stream.send(data)
            stream.close_stdin()
            deadline = None if timeout is None else time.monotonic() + timeout
            timed_out = False
            while not stream.eof:
                if not stream.pump(deadline):
                    if timed_out:  # something outside the tree still holds the pipes open
                        break
                    timed_out = True
                    kill_tree(p.pid, with_root=True)
                    deadline = time.monotonic() + 2
            rc = TIMEOUT_EXIT_CODE if timed_out else p.wait()
            return rc, bytes(stream.stdout), bytes(stream.stderr), timed_out
        finally:
            stream.close()
            self._procs.discard(p)

    def _untar(self, dest: str, data: bytes) -> None:
        rc, _, err, _ = self._run(["sh", "-c", 'mkdir -p "$1" && tar -x -C "$1" -f -', "sh", dest], user="root",
                                  data=data)
        if rc:
            raise SandboxError(f"cannot write into {dest}: {err.decode(errors='replace').strip()[-300:]}")


def _home(user: str | None) -> str:
    if user in (None, "", "root", "0"):
        return "/root"
    try:
        for line in Path("/etc/passwd").read_text().splitlines():
            f = line.split(":")
            if len(f) > 5 and user in (f[0], f[2]):
                return f[5]
    except OSError:
        pass
    return "/"


def _remove_tree(root: Path) -> None:
    """Delete the sandbox directory without ever crossing into another filesystem (a mount
    that outlived its namespace would otherwise be the host's own files)."""
    dev = root.stat().st_dev

    def walk(p: Path) -> None:
        for child in p.iterdir():
            st = child.lstat()
            if child.is_dir() and not child.is_symlink():
                if st.st_dev != dev or os.path.ismount(child):
                    raise SandboxError(f"refusing to delete {child}: it is a mount point")
                walk(child)
                child.rmdir()
            else:
                child.unlink()

    try:
        walk(root)
        root.rmdir()
    except FileNotFoundError:
        pass


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)[:60] or secrets.token_hex(4)
