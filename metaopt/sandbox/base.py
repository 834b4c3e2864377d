"""The Sandbox protocol: an isolated machine that runs commands for one trial; the Backend protocol
that makes sandboxes.

sandbox/ knows nothing of benchmarks, agents or models. Implementations live one per file
(`sandbox/docker.py`) and must pass the conformance suite in `tests/sandbox_conformance.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class ExecResult:
    """What one command did. Never raised: a failing command is data, not an exception."""

    stdout: str
    stderr: str
    exit_code: int  # the command's exit status; 124 when it was killed for running past its timeout
    timed_out: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class SandboxSpec:
    """How to start a sandbox. Resource limits of None mean the backend's default (no limit)."""

    image: str
    workdir: str = "/"
    user: str | None = None  # default user for exec/shell; None = the image's USER
    env: dict[str, str] = field(default_factory=dict)
    cpus: float | None = None
    memory_mb: int | None = None
    pids_limit: int | None = 4096
    network: bool = False  # no network at all unless the task asks for it
    network_name: str | None = None  # join this (labelled) network of the trial's services instead
    aliases: tuple[str, ...] = ()  # names the others on `network_name` reach it by
    gpus: int = 0  # -1 = all GPUs
    labels: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class Shell(Protocol):
    """A persistent shell session: cwd and exported variables carry over between commands."""

    def run(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run `command` in the session. On timeout the command's processes are killed, the
        session survives and the result has timed_out=True, exit_code=124."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Sandbox(Protocol):
    """A started, isolated environment. Use as a context manager; close() removes everything."""

    def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None = None,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Run a command in a fresh process (a str goes through `bash -c`). Stateless."""
        ...

    def shell(self, *, user: str | None = None, workdir: str | None = None) -> Shell:
        """Open a persistent shell session (see Shell)."""
        ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write a file, creating parent directories."""
        ...

    def copy_in(self, src: Path, dest: str) -> None:
        """Copy a host file or directory to the container path `dest`.

        A file lands exactly at `dest` (a full file path); a directory's contents land inside the
        directory `dest`. Missing parent directories are created."""
        ...

    def copy_out(self, src: str, dest: Path) -> None:
        """Copy a container file or directory to the host path `dest` (same rules as copy_in)."""
        ...

    def close(self) -> None:
        """Stop and remove the sandbox and everything it created. Idempotent."""
        ...


class Backend(Protocol):
    """Makes sandboxes: finds or builds their images and starts them (`sandbox/docker.py`,
    `sandbox/local.py`). What only Docker offers (compose services, the verifier's fork, its API
    client) is asked of `DockerBackend` by name."""

    def build_image(self, context_dir: Path, dockerfile: str = "Dockerfile", *, name: str) -> str:
        """Build the image of the context in `context_dir` (cached by content) and return its tag."""
        ...

    def resolve_image(self, ref: str) -> str:
        """`ref`, or the local image it maps to; raises ImageNotFound when there is neither."""
        ...

    def image_workdir(self, image: str) -> str | None:
        """The image's working directory (None: its default)."""
        ...

    def start(self, spec: SandboxSpec, *, run_id: str) -> Sandbox:
        """Start a sandbox for `spec`, labelled with `run_id` so a crash never leaks it."""
        ...

    def prune(self, run_id: str | None = None) -> dict[str, int]:
        """Remove every sandbox of `run_id` (all of metaopt's when None); counts by kind."""
        ...
