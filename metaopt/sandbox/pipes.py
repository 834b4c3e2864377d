"""Host processes for sandboxes that run as subprocesses (sandbox/local.py): a subprocess's pipes
as the stream DockerShell reads, and killing a process tree from the host through /proc."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from pathlib import Path

from metaopt.core.errors import SandboxError


class PipeStream:
    """A subprocess's stdout and stderr as growing bytearrays, with the ExecStream interface
    DockerShell reads (send, pump, eof, close)."""

    def __init__(self, proc: subprocess.Popen):
        if proc.stdin is None or proc.stdout is None or proc.stderr is None:
            raise ValueError("PipeStream needs a process started with stdin, stdout and stderr pipes")
        self.proc = proc
        self._pipes = (proc.stdin, proc.stdout, proc.stderr)
        self.stdout, self.stderr = bytearray(), bytearray()
        self.eof = False
        self._sel = selectors.DefaultSelector()
        for f, buf in ((proc.stdout, self.stdout), (proc.stderr, self.stderr)):
            os.set_blocking(f.fileno(), False)
            self._sel.register(f, selectors.EVENT_READ, buf)

    def send(self, data: bytes) -> None:
        try:
            self._pipes[0].write(data)
            self._pipes[0].flush()
        except (BrokenPipeError, ValueError, OSError) as e:
            self.eof = True
            raise SandboxError(f"the shell's pipe is broken ({e})") from None

    def close_stdin(self) -> None:
        try:
            self._pipes[0].close()
        except OSError:
            pass

    def pump(self, deadline: float | None) -> bool:
        if self.eof:
            return True
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            return False
        events = self._sel.select(wait)
        if not events:
            return False
        for key, _ in events:
            chunk = os.read(key.fd, 1 << 20)
            if chunk:
                key.data.extend(chunk)
            else:
                self._sel.unregister(key.fileobj)
        if not self._sel.get_map():
            self.eof = True
        return True

    def close(self) -> None:
        self._sel.close()
        for f in self._pipes:
            try:
                f.close()
            except OSError:
                pass


def children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def kill_tree(root: int, *, with_root: bool, spare: frozenset[int] | set[int] = frozenset()) -> None:
    """SIGSTOP the tree of `root` until it stops growing, then SIGKILL it (sparing `spare`'s subtrees)."""
    prev: set[int] = set()
    for _ in range(10):
        kids, tree, todo = children(), set(), [root]
        while todo:
            p = todo.pop()
            if p in spare or p in tree:
                continue
            tree.add(p)
            todo.extend(kids.get(p, []))
        if not with_root:
            tree.discard(root)
        if tree == prev:
            break
        for p in tree - prev:
            send_signal(p, signal.SIGSTOP)
        prev = tree
    for p in prev:
        send_signal(p, signal.SIGKILL)


def send_signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
