"""Before a verifier that brings answers, nothing the agent started may still be running."""

from __future__ import annotations

import pytest

from metaopt.evaluation import stop_agent_processes

pytestmark = pytest.mark.docker


def _alive(sb, pattern: str) -> bool:
    return sb.exec(f"for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null; echo; done | grep -q '{pattern}'").exit_code == 0


def test_background_processes_are_killed_and_the_container_keeps_running(make_sandbox):
    sb = make_sandbox()
    sh = sb.shell()
    sh.run("nohup sleep 4001 >/dev/null 2>&1 &")            # an orphan of the agent's shell
    sb.exec("setsid sleep 4002 >/dev/null 2>&1 < /dev/null & disown", user="nobody")  # another user's
    assert _alive(sb, "[s]leep 4001") and _alive(sb, "[s]leep 4002")

    stop_agent_processes(sb)

    assert not _alive(sb, "[s]leep 4001") and not _alive(sb, "[s]leep 4002")
    r = sb.exec("echo still-here")
    assert r.exit_code == 0 and r.stdout.strip() == "still-here"
