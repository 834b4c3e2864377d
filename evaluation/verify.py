"""Verify a finished trial: stop what the agent left running (when the task asks), then the
task's fixed scorer, looked up by its scoring kind (benchmarks.scorers.SCORERS)."""

from __future__ import annotations

from benchmarks.scorers import SCORERS, Verification, VerifyContext
from benchmarks.task import Task
from sandbox.base import Sandbox

# Everything but the container's init (PID 1), its main process (the oldest child of PID 1) and
# this script and its wrapper. Processes that `docker exec` started have parent 0, their orphans parent 1.
_STOP_SCRIPT = r"""
main=""
for d in /proc/[0-9]*; do
  p=${d#/proc/}; s=$(cat "$d/stat" 2>/dev/null) || continue; s=${s##*) }; set -- $s
  if [ "$2" = 1 ] && { [ -z "$main" ] || [ "$p" -lt "$main" ]; }; then main=$p; fi
done
for d in /proc/[0-9]*; do
  p=${d#/proc/}; case " 1 $$ $PPID $main " in *" $p "*) continue;; esac; kill -9 "$p" 2>/dev/null
done
true
"""


def verify(task: Task, sb: Sandbox, ctx: VerifyContext) -> Verification:
    """Score the sandbox the agent left. Never raises for the agent's failures."""
    if task.verifier.stop_agent_processes:  # first, whatever the scoring kind: nothing may watch the verifier
        stop_agent_processes(sb)
    return SCORERS.load(task.scoring)(task, sb, ctx)


def stop_agent_processes(sb: Sandbox) -> None:
    """Kill every process the agent left in `sb` (background jobs, its shell); the container
    itself keeps running for the verifier."""
    sb.exec(_STOP_SCRIPT, user="root", timeout=30)
