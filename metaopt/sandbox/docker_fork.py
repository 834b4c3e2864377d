"""A fresh container for the verifier: the agent's container's filesystem, none of its processes.

`fork(backend, sb, ...)` ends the agent's container (`docker kill`: every process in its PID
namespace dies with its init), takes its `docker diff` and commits it to a snapshot image; for
tasks whose tests talk to a service the agent left running, it freezes the container instead
(`docker pause`) for the diff and the commit, then thaws it, and the new container joins its
network namespace only: the services stay reachable over localhost, but no
process of the agent's shares the verifier's filesystem or PID namespace, so nothing it does
after the capture can reach the tests, their configuration or the reward. A task with compose
services (sandbox.docker_services) keeps them: the new container is on their network either way
(through the agent's namespace, or joined to it by the spec's `network_name`).

The snapshot is tagged `metaopt-verify/<container>:<random>` and labelled like the trial's
container (`metaopt.snapshot=1`); `Fork.close()` removes the verifier's container and the image,
and `DockerBackend.prune` removes leftovers of a crash.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any

import docker.errors
import requests

from metaopt.core.errors import SandboxError, SandboxUnavailable
from metaopt.sandbox import forensics as fx
from metaopt.sandbox.docker_errors import explain
from metaopt.sandbox.toolchain import Toolchain, new_root

SNAPSHOT_REPO = "metaopt-verify/"
SNAPSHOT = "metaopt.snapshot"


@dataclass
class Fork:
    """The verifier's container (`sb`) with its static toolchain (`tc`, installed before it
    started: its main process is that busybox's `sleep`), the agent container's changes as they were at the
    capture (`changes`, docker diff rows), the snapshot image and what the capture cost."""

    sb: Any
    tc: Toolchain
    changes: list[tuple[str, str]]
    image: str
    api: Any
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def locked(self) -> bool:
        """Whether the locked verifier toolchain is mounted in `sb`."""
        return self.report.get("mounts") == "locked toolchain mounted"

    def close(self) -> None:
        """Remove the verifier's container and the snapshot image. Never raises for either
        being gone already (a prune got there first)."""
        try:
            self.sb.close()
        except SandboxError:
            pass
        try:
            self.api.remove_image(self.image, force=True)
        except (docker.errors.APIError, requests.exceptions.RequestException):
            pass


def fork(backend: Any, sb: Any, *, keep_running: bool, run_id: str, mounts: list[Any] | None = None) -> Fork:
    """Capture `sb` (a DockerSandbox of `backend`) and start the verifier's container from it.
    `keep_running`: the agent's container is thawed and the new one joins its network namespace;
    otherwise the agent's container is killed. `mounts` go on the verifier's container only (the
    locked toolchain, sandbox.verify_toolchain); if it cannot start with them, it starts without
    and `report["mounts"]` says so. Raises SandboxError (SandboxUnavailable when the
    daemon is gone)."""
    api, t0 = sb.api, time.monotonic()
    image = f"{SNAPSHOT_REPO}{sb.name.lower()[:100]}:{secrets.token_hex(6)}"
    repo, tag = image.rsplit(":", 1)
    try:
        running = bool(api.inspect_container(sb.id)["State"].get("Running"))
        if running and not keep_running:  # nothing of the agent's runs once its init is gone
            api.kill(sb.id)
            try:
                api.wait(sb.id, timeout=60)
            except requests.exceptions.ReadTimeout:
                raise SandboxError(f"sandbox {sb.name} did not stop within 60 s of docker kill") from None
        elif running:
            api.pause(sb.id)
        try:
            changes = fx.changes(sb)
            api.commit(sb.id, repository=repo, tag=tag, pause=False, changes=[f"LABEL {SNAPSHOT}=1"])
        finally:
            if running and keep_running:
                api.unpause(sb.id)
    except docker.errors.APIError as e:
        raise SandboxError(f"cannot capture sandbox {sb.name} for the verifier: {explain(e)}") from None
    except requests.exceptions.RequestException as e:
        raise SandboxUnavailable(f"lost the Docker daemon while capturing {sb.name}: {e}") from None
    t1 = time.monotonic()
    spec = replace(sb.spec, image=image, labels={**sb.spec.labels, "metaopt.role": "verifier"})
    root, tcs, mounted = new_root(), [], bool(mounts)

    def start(with_mounts: list[Any] | None) -> Any:  # its main process is the static busybox put in before the start
        tcs.clear()
        return backend.start(spec, run_id=run_id, network_from=sb.id if running and keep_running else None,
                             main=[f"{root}/busybox", "sleep", "2147483647"],
                             before_start=lambda new: tcs.append(Toolchain.install(new, root)), mounts=with_mounts)
    try:
        try:
            vsb = start(mounts)
        except SandboxError:
            if not mounts:
                raise
            vsb, mounted = start(None), False  # e.g. the agent made /etc/ld.so.preload a directory
    except BaseException:
        try:
            api.remove_image(image, force=True)
        except (docker.errors.APIError, requests.exceptions.RequestException):
            pass
        raise
    report = {"capture_s": round(t1 - t0, 3), "start_s": round(time.monotonic() - t1, 3),
              "agent_container": "kept for its services (network shared only)" if running and keep_running
              else "killed" if running else "had stopped"}
    if mounts:
        report["mounts"] = "locked toolchain mounted" if mounted else "the locked toolchain could not be mounted"
    return Fork(vsb, tcs[0], changes, image, api, report)
