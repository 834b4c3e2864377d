"""Docker exec plumbing shared by DockerSandbox.exec and the persistent DockerShell.

- `ExecStream`: the multiplexed stdout/stderr stream of one exec, read off the hijacked socket.
- `KILL_TREE`: a POSIX sh script that kills a process tree using only /proc (no procps needed).
- `DockerShell`: one long-lived bash per session, fed commands over the exec's stdin.
"""

from __future__ import annotations

import secrets
import socket
import time
from typing import Any, Protocol

from metaopt.core.errors import SandboxError
from metaopt.sandbox.base import ExecResult


class ExecHost(Protocol):
    """What a DockerShell needs of its sandbox (DockerSandbox, LocalSandbox): start a process with
    its streams, read its exit code, kill a process tree."""

    def _start_exec(self, argv: list[str], *, user: str | None, workdir: str | None,
                    env: dict[str, str] | None = None, stdin: bool = False) -> tuple[Any, Any]: ...

    def _exit_code(self, exec_id: Any, /) -> int: ...

    def _kill_tree(self, root: str, *, with_root: bool, spare: list[str] | None = None) -> None: ...

TIMEOUT_EXIT_CODE = 124
EXEC_OUTPUT_LIMIT = 32 << 20  # bytes kept per stream of one exec (head and tail): a flood cannot exhaust memory
# Runs the command under a sh that records its pid, so a timeout can kill the whole tree.
PID_WRAPPER = 'echo $$ >"$0" 2>/dev/null; "$@"; rc=$?; rm -f "$0"; exit $rc'
PID_EXEC = 'echo $$ >"$0" 2>/dev/null; exec "$@"'  # under the runner's own sh (sandbox.toolchain): no rm to trust
_HEADER = 8  # docker's stream frame: [stream, 0, 0, 0, size (4 bytes, big-endian)]

# Kill the process tree rooted at $1 (a pid, or a file holding one, waited for up to ~1 s since a
# very short timeout can fire before the wrapper wrote it). $2=1 also kills the root; the pids in
# $3 (a shell's earlier background jobs) and their descendants are spared. Processes
# are SIGSTOPped until the tree stops growing, then SIGKILLed: killing a parent first would
# reparent its children to init and let them escape.
KILL_TREE = r"""
case "$1" in
  /*) i=0; root=
      while [ $i -lt 20 ]; do
        root=$(cat "$1" 2>/dev/null); [ -n "$root" ] && break; sleep 0.05; i=$((i+1))
      done; rm -f "$1" ;;
  *) root=$1 ;;
esac
[ -n "$root" ] || exit 0
tree() {
  tbl=$(for f in /proc/[0-9]*/stat; do
          read -r l < "$f" 2>/dev/null || continue
          r=${l##*) }; set -- $r; echo "${l%% *} $2"
        done)
  ids=" $root "; grew=1
  while [ $grew = 1 ]; do
    grew=0
    while read -r p pp; do
      case " $3 " in *" $p "*) continue ;; esac
      case "$ids" in *" $pp "*) case "$ids" in *" $p "*) ;; *) ids="$ids$p "; grew=1 ;; esac ;; esac
    done <<EOF
$tbl
EOF
  done
  [ "$2" = 1 ] || ids=${ids#" $root "}
  echo $ids
}
prev=; n=0
while [ $n -lt 10 ]; do
  pids=$(tree "$root" "$2" "$3"); [ "$pids" = "$prev" ] && break
  [ -n "$pids" ] && kill -STOP $pids 2>/dev/null; prev=$pids; n=$((n+1))
done
[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
exit 0
"""


class ExecStream:
    """The hijacked connection of one started exec: demultiplexes frames into `stdout` and
    `stderr` (bytearrays that only grow) and can write to the process's stdin."""

    def __init__(self, response: Any, limit: int | None = None) -> None:
        self._response = response
        # With a limit, each stream keeps its first limit/2 bytes in stdout/stderr and a rolling
        # last limit/2 in a tail buffer (text() joins them): a flood cannot exhaust memory.
        self._limit = limit
        self._tails = {1: bytearray(), 2: bytearray()}
        self._dropped = {1: 0, 2: 0}
        fp = response.raw._fp.fp  # http.client's buffered reader of the hijacked connection
        self._sock: socket.socket = fp.raw._sock
        self._buf = bytearray()
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.eof = False
        # http.client reads the response headers through an 8 KiB buffer, so the first frames
        # may already sit there (seen in ~10% of fast execs); the SDK's socket=True loses them.
        self._sock.setblocking(False)
        try:
            self._feed(fp.read1(1 << 20) or b"")
        except (BlockingIOError, TypeError):
            pass
        self._sock.setblocking(True)

    @classmethod
    def start(cls, api: Any, exec_id: str, limit: int | None = None) -> ExecStream:
        """Start exec `exec_id` and return its stream (raises docker.errors.APIError)."""
        res = api._post_json(
            api._url("/exec/{0}/start", exec_id),
            headers={"Connection": "Upgrade", "Upgrade": "tcp"},
            data={"Tty": False, "Detach": False},
            stream=True,
        )
        api._raise_for_status(res)
        return cls(res, limit)

    def pump(self, deadline: float | None) -> bool:
        """Read what arrives next (blocking until `deadline`, a time.monotonic() value, or
        forever when None). Returns False if the deadline passed with nothing read."""
        if self.eof:
            return True
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            return False
        self._sock.settimeout(wait)
        try:
            chunk = self._sock.recv(1 << 20)
        except TimeoutError:
            return False
        except OSError:
            chunk = b""  # connection reset: the exec (or its container) is gone
        if not chunk:
            self.eof = True
        self._feed(chunk)
        return True

    def send(self, data: bytes) -> None:
        self._sock.settimeout(30)
        try:
            self._sock.sendall(data)
        except OSError as e:
            self.eof = True
            raise SandboxError(f"the shell's connection is broken ({e})") from None

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._response.close()

    def _feed(self, chunk: bytes) -> None:
        buf = self._buf
        buf += chunk
        pos = 0
        while len(buf) - pos >= _HEADER:
            size = int.from_bytes(buf[pos + 4 : pos + 8], "big")
            end = pos + _HEADER + size
            if end > len(buf):
                break
            self._keep(2 if buf[pos] == 2 else 1, buf[pos + _HEADER : end])
            pos = end
        del buf[:pos]

    def _keep(self, which: int, data: bytes | bytearray) -> None:
        head = self.stderr if which == 2 else self.stdout
        if self._limit is None:
            head.extend(data)
            return
        half = self._limit // 2
        room = max(0, half - len(head))
        head.extend(data[:room])
        tail = self._tails[which]
        tail.extend(data[room:])
        if len(tail) > 2 * half:  # compact now and then: amortised O(1) per byte
            cut = len(tail) - half
            del tail[:cut]
            self._dropped[which] += cut

    def text(self, which: int) -> str:
        """The whole output of stream 1 (stdout) or 2 (stderr), decoded; with a limit, head and
        tail around a note of how many bytes were dropped."""
        head, tail = (self.stderr if which == 2 else self.stdout), self._tails[which]
        if self._limit is not None and len(tail) > self._limit // 2:
            cut = len(tail) - self._limit // 2
            del tail[:cut]
            self._dropped[which] += cut
        note = f"\n[... {self._dropped[which]} bytes of output dropped ...]\n".encode() if self._dropped[which] else b""
        return bytes(head + note + tail).decode("utf-8", "replace")


def sh_quote(text: str) -> str:
    """Quote for POSIX sh (and bash): one single-quoted word, any bytes but NUL."""
    return "'" + text.replace("'", "'\\''") + "'"


class DockerShell:
    """A persistent bash (`sh` when the image has no bash) in a DockerSandbox.

    Each run() feeds `{ eval '<command>'\\n} </dev/null` to the shell followed by end markers on
    stdout and stderr carrying `$?`, so cd, exports and functions persist, heredocs and quotes
    need no care, and a command that reads stdin sees EOF. On timeout the command's processes
    (the shell's descendants) are killed and the session goes on. If the shell process itself
    ends (the command ran `exit`, or a timed-out loop of builtins had to be killed with it), that
    run returns what it got, and the next run transparently starts a new shell in the last known
    working directory (the session's own one if that directory is gone): exported variables and
    functions are then lost. Not thread-safe.
    """

    def __init__(self, sandbox: ExecHost, *, user: str | None, workdir: str | None) -> None:
        self._sbx = sandbox
        self._user = user
        self._cwd = self._workdir = workdir
        self._stream: ExecStream | None = None
        self._exec_id = ""
        self._pid = ""
        self._jobs: list[str] = []  # background jobs of earlier runs: a timeout spares them
        self._closed = False
        self._open()  # fail here, not at the first command, when no shell can start

    def run(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run `command` in the session; see the class docstring. Raises SandboxError when the
        sandbox is gone or the shell cannot be started, never for a failing command."""
        if self._closed:
            raise SandboxError("this shell session is closed")
        if self._stream is None or self._stream.eof:
            try:
                self._open()
            except SandboxError:
                if self._cwd == self._workdir:
                    raise
                self._cwd = self._workdir  # the last directory is gone (the agent removed it)
                self._open()
        return self._run(command, timeout)

    def close(self) -> None:
        """End the session (the shell exits on EOF). Idempotent."""
        self._closed = True
        self._drop()

    def _open(self) -> None:
        self._drop()
        launch = "command -v bash >/dev/null 2>&1 && exec bash --noprofile --norc; exec sh"
        self._exec_id, self._stream = self._sbx._start_exec(
            ["sh", "-c", launch], user=self._user, workdir=self._cwd, stdin=True
        )
        hello = self._run("echo $$", timeout=30)
        if not hello.ok or not hello.stdout.strip().isdigit():
            self._drop()
            raise SandboxError(f"could not start a shell: {(hello.stdout + hello.stderr)[-300:]}")
        self._pid = hello.stdout.strip()

    def _run(self, command: str, timeout: float | None) -> ExecResult:
        stream = self._stream
        assert stream is not None
        t0 = time.monotonic()
        nonce = secrets.token_hex(8)
        out_mark = f"\n__MO{nonce} ".encode()
        end_mark = f"\n{nonce}MO__\n".encode()
        err_mark = f"\n__MO{nonce}__\n".encode()
        stream.send(
            f"{{ eval {sh_quote(command)}\n}} </dev/null\n"
            f"printf '\\n__MO%s %d %s\\n' {nonce} \"$?\" \"$PWD\"; jobs -p; "
            f"printf '%sMO__\\n' {nonce}; "
            f"printf '\\n__MO%s__\\n' {nonce} >&2\n".encode()
        )
        deadline = None if timeout is None else t0 + timeout
        timed_out = False
        o = e = -1
        o_from = e_from = 0  # rescanning only the new bytes keeps a 20 MB output linear
        while True:
            if o < 0:
                o = stream.stdout.find(out_mark, o_from)
                o_from = max(0, len(stream.stdout) - len(out_mark))
            if e < 0:
                e = stream.stderr.find(err_mark, e_from)
                e_from = max(0, len(stream.stderr) - len(err_mark))
            if o >= 0 and e >= 0 and stream.stdout.find(end_mark, o) >= 0:
                break
            if stream.eof:
                return self._died(t0, timed_out)
            if not stream.pump(deadline):
                if timed_out:  # the group did not end: a builtin loop; kill the shell too
                    self._sbx._kill_tree(self._pid, with_root=True)
                    self._drop()
                    return self._result(stream.stdout, stream.stderr, TIMEOUT_EXIT_CODE, t0, True)
                timed_out = True
                self._sbx._kill_tree(self._pid, with_root=False, spare=self._jobs)
                deadline = time.monotonic() + 1.5
        end = stream.stdout.find(end_mark, o)
        trailer = stream.stdout[o + len(out_mark) : end].decode("utf-8", "replace")
        status, *self._jobs = trailer.split("\n")  # "rc cwd", then one line per job pid
        rc_text, _, cwd = status.partition(" ")
        self._cwd = cwd or self._cwd
        out, err = bytes(stream.stdout[:o]), bytes(stream.stderr[:e])
        # bytes after the markers (a background job's output) start the next run's output
        del stream.stdout[: end + len(end_mark)]
        del stream.stderr[: e + len(err_mark)]
        rc = TIMEOUT_EXIT_CODE if timed_out else int(rc_text)
        return self._result(out, err, rc, t0, timed_out)

    def _died(self, t0: float, timed_out: bool) -> ExecResult:
        stream = self._stream
        assert stream is not None
        rc = TIMEOUT_EXIT_CODE if timed_out else self._sbx._exit_code(self._exec_id)
        self._drop()
        return self._result(stream.stdout, stream.stderr, rc, t0, timed_out)

    @staticmethod
    def _result(out: bytes | bytearray, err: bytes | bytearray, rc: int, t0: float,
                timed_out: bool) -> ExecResult:
        return ExecResult(
            stdout=bytes(out).decode("utf-8", "replace"),
            stderr=bytes(err).decode("utf-8", "replace"),
            exit_code=rc,
            timed_out=timed_out,
            duration_s=time.monotonic() - t0,
        )

    def _drop(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
