"""Conformance suite for the Sandbox protocol (sandbox/base.py).

Any implementation runs it by subclassing and providing a `make_sandbox` fixture: a callable
that starts a fresh sandbox (keyword arguments are SandboxSpec fields other than `image`) and
closes it at teardown. The image needs bash, coreutils and a `nobody` user (any Debian image).

    class TestMySandbox(SandboxConformance):
        @pytest.fixture
        def make_sandbox(self): ...
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from metaopt.core.errors import SandboxError
from metaopt.sandbox.base import ExecResult, Sandbox, Shell

# Lists command lines of running processes without procps (which an image may lack).
PROCS = 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done'


def running(sb: Sandbox, needle: str) -> list[str]:
    """Command lines of processes in `sb` that start with `needle`."""
    return [line for line in sb.exec(PROCS).stdout.splitlines() if line.startswith(needle)]


def tree(root: Path) -> dict[str, bytes | None]:
    """A host tree as {relative path: bytes, or None for a directory}."""
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


class SandboxConformance:
    @pytest.fixture
    def sandbox(self, make_sandbox) -> Sandbox:
        return make_sandbox()

    # -- exec ---------------------------------------------------------------------------

    def test_is_a_sandbox(self, sandbox):
        assert isinstance(sandbox, Sandbox)

    @pytest.mark.parametrize("code", [0, 1, 42])
    def test_exec_exit_codes(self, sandbox, code):
        r = sandbox.exec(f"exit {code}")
        assert isinstance(r, ExecResult)
        assert (r.exit_code, r.timed_out, r.ok) == (code, False, code == 0)

    def test_exec_separates_stdout_and_stderr(self, sandbox):
        r = sandbox.exec("echo out; echo err >&2; printf tail")
        assert (r.stdout, r.stderr) == ("out\ntail", "err\n")
        assert r.duration_s > 0

    def test_exec_argv_list_skips_the_shell(self, sandbox):
        r = sandbox.exec(["printf", "%s|", "a b", "$HOME", "it's"])
        assert r.stdout == "a b|$HOME|it's|"

    def test_exec_large_output_is_intact(self, sandbox):
        r = sandbox.exec("seq 1 3000000; echo done >&2")  # ~20.9 MB
        assert r.exit_code == 0 and r.stderr == "done\n"
        assert len(r.stdout) > 20_000_000
        assert r.stdout == "".join(f"{i}\n" for i in range(1, 3_000_001))

    def test_exec_decodes_invalid_utf8_with_replacement(self, sandbox):
        r = sandbox.exec("printf 'caf\\xc3\\xa9 \\xff'")
        assert r.stdout == "café \ufffd"

    def test_exec_workdir_env_user(self, sandbox):
        assert sandbox.exec("pwd", workdir="/tmp").stdout == "/tmp\n"
        r = sandbox.exec("echo $A-$B", env={"A": "1", "B": "two words"})
        assert r.stdout == "1-two words\n"
        assert sandbox.exec("id -un", user="nobody").stdout == "nobody\n"
        assert sandbox.exec("id -u", user="root").stdout == "0\n"

    def test_spec_workdir_env_user_are_defaults(self, make_sandbox):
        sb = make_sandbox(workdir="/srv/work", env={"SPEC_VAR": "x"}, user="nobody")
        assert sb.exec("pwd; echo $SPEC_VAR; id -un").stdout == "/srv/work\nx\nnobody\n"
        assert sb.shell().run("pwd; id -un").stdout == "/srv/work\nnobody\n"

    def test_exec_timeout_kills_the_process_tree(self, sandbox):
        t0 = time.monotonic()
        r = sandbox.exec("echo started; (sleep 1001; echo never) & sleep 1000", timeout=1)
        elapsed = time.monotonic() - t0
        assert (r.exit_code, r.timed_out, r.ok) == (124, True, False)
        assert r.stdout == "started\n"
        assert elapsed < 1 + 2
        assert running(sandbox, "sleep 100") == []
        assert sandbox.exec("echo alive").stdout == "alive\n"

    def test_exec_within_timeout_is_not_timed_out(self, sandbox):
        r = sandbox.exec("sleep 0.2; exit 3", timeout=10)
        assert (r.exit_code, r.timed_out) == (3, False)

    # -- files --------------------------------------------------------------------------

    def test_binary_file_round_trip(self, sandbox):
        data = os.urandom(1 << 20) + b"\0\0\n\r\0"
        sandbox.write_file("/tmp/deep/er/blob.bin", data, mode=0o600)
        assert sandbox.read_file("/tmp/deep/er/blob.bin") == data
        assert sandbox.exec("stat -c %a /tmp/deep/er/blob.bin").stdout == "600\n"
        assert sandbox.exec("sha256sum < /tmp/deep/er/blob.bin").stdout.split()[0] == (
            __import__("hashlib").sha256(data).hexdigest())

    def test_write_file_text_and_relative_path(self, make_sandbox):
        sb = make_sandbox(workdir="/work")
        sb.write_file("notes/a.txt", "héllo\n")
        assert sb.exec("cat /work/notes/a.txt").stdout == "héllo\n"
        sb.write_file("/work/notes/a.txt", "replaced")
        assert sb.read_file("notes/a.txt") == b"replaced"

    def test_read_missing_file_raises_file_not_found(self, sandbox):
        with pytest.raises(FileNotFoundError):
            sandbox.read_file("/no/such/file")

    def test_copy_in_and_out_a_tree(self, sandbox, tmp_path):
        src = tmp_path / "src"
        (src / "sub" / "deeper").mkdir(parents=True)
        (src / "empty").mkdir()
        (src / "a.bin").write_bytes(os.urandom(100_000) + b"\0")
        (src / "sub" / "b.txt").write_text("b\n")
        (src / "sub" / "deeper" / "c.bin").write_bytes(b"\0" * 10 + os.urandom(10))
        (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
        (src / "run.sh").chmod(0o755)
        sandbox.copy_in(src, "/opt/copied/here")
        assert sandbox.exec("/opt/copied/here/run.sh").stdout == "ran\n"
        out = tmp_path / "out"
        sandbox.copy_out("/opt/copied/here", out)
        assert tree(out) == tree(src)
        assert os.access(out / "run.sh", os.X_OK)

    def test_copy_in_and_out_a_file(self, sandbox, tmp_path):
        data = os.urandom(5000) + b"\0"
        (tmp_path / "f.bin").write_bytes(data)
        sandbox.copy_in(tmp_path / "f.bin", "/tmp/new/dir/renamed.bin")
        assert sandbox.read_file("/tmp/new/dir/renamed.bin") == data
        sandbox.copy_out("/tmp/new/dir/renamed.bin", tmp_path / "back" / "g.bin")
        assert (tmp_path / "back" / "g.bin").read_bytes() == data

    def test_copy_in_merges_into_an_existing_directory(self, sandbox, tmp_path):
        (tmp_path / "x.txt").write_text("x")
        sandbox.exec("mkdir -p /data && echo keep > /data/old.txt")
        sandbox.copy_in(tmp_path, "/data")
        assert sandbox.exec("cat /data/old.txt /data/x.txt").stdout == "keep\nx"

    # -- shell --------------------------------------------------------------------------

    def test_shell_persists_cwd_and_exports(self, sandbox):
        sh = sandbox.shell()
        assert isinstance(sh, Shell)
        assert sh.run("cd /tmp && export FOO=bar && mkdir -p sub").ok
        assert sh.run("pwd; echo $FOO").stdout == "/tmp\nbar\n"
        sh.run("cd sub; f() { echo fn-$1; }")
        assert sh.run("pwd; f x").stdout == "/tmp/sub\nfn-x\n"
        sh.close()

    def test_shell_exit_codes_and_stderr(self, sandbox):
        sh = sandbox.shell()
        r = sh.run("echo out; echo err >&2; false")
        assert (r.stdout, r.stderr, r.exit_code, r.timed_out) == ("out\n", "err\n", 1, False)
        assert sh.run("sh -c 'exit 42'").exit_code == 42
        assert sh.run("true").exit_code == 0
        assert sh.run("no-such-command-xyz").exit_code == 127

    def test_shell_large_output_is_intact(self, sandbox):
        r = sandbox.shell().run("seq 1 3000000; seq 1 1000 >&2")
        assert r.stdout == "".join(f"{i}\n" for i in range(1, 3_000_001))
        assert r.stderr == "".join(f"{i}\n" for i in range(1, 1001))

    def test_shell_tricky_commands(self, sandbox):
        sh = sandbox.shell()
        heredoc = "cat <<'EOF'\nit's \"quoted\" $HOME `x`\nEOF"
        assert sh.run(heredoc).stdout == "it's \"quoted\" $HOME `x`\n"
        assert sh.run("echo 'a\nb'\necho c").stdout == "a\nb\nc\n"
        assert sh.run("printf no-newline").stdout == "no-newline"
        assert sh.run("printf x >&2").stderr == "x"
        assert sh.run("cat; read line; echo rc=$?").stdout == "rc=1\n"  # stdin is empty
        r = sh.run("echo 'unbalanced")
        assert r.exit_code != 0 and sh.run("echo still").stdout == "still\n"
        assert sh.run("echo $((6 * 7))").stdout == "42\n"

    def test_shell_timeout_kills_and_session_survives(self, sandbox):
        sh = sandbox.shell()
        sh.run("cd /tmp; export KEEP=1")
        t0 = time.monotonic()
        r = sh.run("echo before; sleep 1000", timeout=1)
        assert time.monotonic() - t0 < 1 + 2
        assert (r.exit_code, r.timed_out) == (124, True)
        assert r.stdout == "before\n"
        assert running(sandbox, "sleep 1000") == []
        r = sh.run("pwd; echo $KEEP")
        assert (r.stdout, r.exit_code) == ("/tmp\n1\n", 0)

    def test_shell_timeout_spares_earlier_background_jobs(self, sandbox):
        sh = sandbox.shell()
        sh.run("sleep 1002 > /dev/null 2>&1 &")
        assert sh.run("sleep 1003", timeout=0.5).timed_out
        assert running(sandbox, "sleep 1003") == []
        assert len(running(sandbox, "sleep 1002")) == 1

    def test_shell_user_and_workdir(self, sandbox):
        sh = sandbox.shell(user="nobody", workdir="/tmp")
        assert sh.run("id -un; pwd").stdout == "nobody\n/tmp\n"

    def test_shells_are_independent(self, sandbox):
        a, b = sandbox.shell(), sandbox.shell()
        a.run("cd /tmp; export V=a")
        assert b.run("echo ${V:-unset}").stdout == "unset\n"
        assert a.run("echo $V").stdout == "a\n"

    # -- lifecycle ----------------------------------------------------------------------

    def test_close_is_idempotent_and_final(self, make_sandbox):
        sb = make_sandbox()
        with sb:
            assert sb.exec("true").ok
        sb.close()
        with pytest.raises(SandboxError):
            sb.exec("true")
