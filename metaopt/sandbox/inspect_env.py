"""Our Sandbox as an inspect-ai sandbox environment, registered under the name `metaopt`.

Two uses:
- metaopt's inspect bridge wraps the live DockerSandbox of a trial (`MetaoptSandboxEnvironment(sb)`)
  so that an inspect scorer's `sandbox().exec(...)` inspects the real container the agent used.
- inspect itself can run samples in our sandbox (`inspect eval ... --sandbox metaopt[:IMAGE]`, or
  `sandbox=("metaopt", "IMAGE or path/to/Dockerfile")` in a Task): `sample_init` starts one
  DockerSandbox per sample, with no network. Inspect's own `docker` sandbox needs Docker Compose
  and a newer Docker than some machines have; this one needs only the Docker daemon.

Importing this module imports inspect-ai (large, slow): only the inspect bridge and inspect's
entry point (`inspect_ai` group in pyproject.toml) import it.
"""

from __future__ import annotations

import asyncio
import errno
import posixpath
import secrets
import shlex
from pathlib import Path
from typing import Any, Literal, overload

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    sandboxenv,
)

from metaopt.core.errors import UserError
from metaopt.sandbox.base import Sandbox, SandboxSpec

DEFAULT_IMAGE = "metaopt-base:latest"


@sandboxenv(name="metaopt")
class MetaoptSandboxEnvironment(SandboxEnvironment):
    """An inspect SandboxEnvironment over a started `sandbox.base.Sandbox`. Relative paths and a
    missing `cwd` resolve against `workdir` (the task's working directory). Blocking sandbox calls
    run in a worker thread. A command past its timeout raises TimeoutError, as inspect expects."""

    _backend: Any = None  # DockerBackend shared by the samples inspect itself starts
    _run_id: str | None = None

    def __init__(self, sb: Sandbox, workdir: str = "/") -> None:
        super().__init__()
        self.sb, self.workdir = sb, workdir

    async def exec(self, cmd: list[str], input: str | bytes | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None, timeout: int | None = None,
                   timeout_retry: bool = True, concurrency: bool = True) -> ExecResult[str]:
        argv = [str(a) for a in cmd]
        stdin_file = None
        if input is not None:  # our exec has no stdin: stage it in a file and redirect
            stdin_file = f"/tmp/.metaopt-stdin-{secrets.token_hex(6)}"
            await asyncio.to_thread(self.sb.write_file, stdin_file, input, 0o644)
            argv = ["bash", "-c", f'{shlex.join(argv)} < {stdin_file}; rc=$?; rm -f {stdin_file}; exit $rc']
        r = await asyncio.to_thread(self.sb.exec, argv, timeout=timeout, workdir=self._path(cwd or "."),
                                    env=env, user=user)
        if r.timed_out:
            raise TimeoutError(f"command ran past its {timeout} s timeout: {shlex.join(argv)[:200]}")
        if r.exit_code == 126 and "permission denied" in (r.stdout + r.stderr).lower():
            raise PermissionError(f"cannot execute {argv[0]}: permission denied")
        return ExecResult(success=r.exit_code == 0, returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        path = self._path(file)
        # our write_file would replace a directory; inspect's contract is IsADirectoryError
        if (await asyncio.to_thread(self.sb.exec, ["test", "-d", path])).exit_code == 0:
            raise IsADirectoryError(errno.EISDIR, "is a directory in the sandbox", file)
        await asyncio.to_thread(self.sb.write_file, path, contents, 0o644)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        data = await asyncio.to_thread(self.sb.read_file, self._path(file))
        if len(data) > SandboxEnvironmentLimits.MAX_READ_FILE_SIZE:
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, None)
        # newline="" semantics: bytes decoded as they are, \r\n kept
        return data.decode("utf-8") if text else data

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.workdir, path))

    # -- inspect's own lifecycle (used only when inspect starts the samples) ----------------------
    @classmethod
    async def sample_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                          metadata: dict[str, str]) -> dict[str, SandboxEnvironment]:
        """config: None (metaopt-base:latest), an image name, or a path to a Dockerfile (built
        with metaopt's content-hash cache and image map)."""
        sb, workdir = await asyncio.to_thread(_start, cls, task_name, config)
        return {"default": cls(sb, workdir)}

    @classmethod
    async def sample_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                             environments: dict[str, SandboxEnvironment], interrupted: bool) -> None:
        for env in environments.values():
            if isinstance(env, MetaoptSandboxEnvironment):
                await asyncio.to_thread(env.sb.close)

    @classmethod
    async def task_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                           cleanup: bool) -> None:
        if cleanup and cls._backend is not None and cls._run_id is not None:
            await asyncio.to_thread(cls._backend.prune, cls._run_id)

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """`inspect sandbox cleanup metaopt RUN_ID` removes that run's containers. Without an id
        nothing is removed: other metaopt runs may share the daemon (`metaopt sandbox prune`)."""
        if id:
            from metaopt.sandbox.docker import DockerBackend

            await asyncio.to_thread(DockerBackend().prune, id)


def _start(cls: type[MetaoptSandboxEnvironment], task_name: str, config: Any) -> tuple[Sandbox, str]:
    from metaopt.sandbox.docker import DockerBackend

    if cls._backend is None:
        cls._backend, cls._run_id = DockerBackend(), f"inspect-{secrets.token_hex(4)}"
    backend = cls._backend
    if config is not None and not isinstance(config, str):
        raise UserError(f"metaopt sandbox config must be an image name or a Dockerfile path, got {config!r}")
    ref = config or DEFAULT_IMAGE
    path = Path(ref)
    if path.is_file():
        image = backend.build_image(path.parent, path.name, name=task_name)
    else:
        image = backend.resolve_image(ref)
    workdir = backend.image_workdir(image) or "/"
    spec = SandboxSpec(image=image, workdir=workdir, labels={"metaopt.task_id": task_name})
    return backend.start(spec, run_id=cls._run_id), workdir
