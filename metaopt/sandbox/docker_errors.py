"""How sandbox.docker words Docker failures: one line each, for SandboxError and
SandboxUnavailable messages."""

from __future__ import annotations

import docker
import docker.errors

UNREACHABLE = "cannot reach the Docker daemon at {}: is dockerd running? ({})"


def daemon_url(client: docker.DockerClient) -> str:
    for adapter in client.api.adapters.values():
        socket_path = getattr(adapter, "socket_path", None)
        if socket_path:
            return f"unix://{socket_path}"
    return client.api.base_url


def root_cause(e: BaseException) -> str:
    while e.__cause__ or e.__context__:
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def explain(e: docker.errors.APIError) -> str:
    return str(e.explanation or e).strip().splitlines()[0][:300]
