"""Artifacts: the paths of the agent's container a separate verifier gets, and nothing else.

`take(api, cid, wanted, limit)` reads each path out of the (stopped) agent's container through
the Docker API and keeps a sanitized copy in one tar archive: Python's `data` extraction filter
decides what is safe (no absolute or escaping names, no links leaving the artifact, no devices or
fifos, setuid/setgid and group/other write bits cleared; owners kept), names are re-rooted under the artifact's
own path, and `exclude` globs leave files out. `put(api, cid, taken)` extracts that archive at the
root of the verifier's container. What the agent left is data: nothing of it runs before the
verifier runs it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import posixpath
import tarfile
import tempfile
from dataclasses import dataclass, field
from typing import Any

import docker.errors
import requests

from metaopt.core.errors import ArtifactRefused, SandboxError, SandboxUnavailable

MAX_ARTIFACT_BYTES = 2 << 30
"""Bytes all of a trial's artifacts may hold together (read out of the agent's container)."""


@dataclass
class Taken:
    """The sanitized archive (`data`, a spooled temp file) and one report row per artifact."""

    data: Any
    rows: list[dict[str, Any]] = field(default_factory=list)

    def close(self) -> None:
        self.data.close()


def take(api: Any, cid: str, wanted: list[tuple[str, list[str]]], limit: int = MAX_ARTIFACT_BYTES,
         *, sanitize: bool = True) -> Taken:
    """Copy `wanted` (source path, exclude globs) out of container `cid`. A missing path is
    recorded as missing (the verifier judges its absence); past `limit` bytes in all: ArtifactRefused.
    `sanitize=False` keeps every entry as it is (a shared verifier's filesystem diff, kept for a
    regrade: the container it goes back into held those entries already)."""
    out = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 - Taken owns it (Taken.close)
    taken, budget = Taken(out), [limit]
    with tarfile.open(fileobj=out, mode="w") as dst:
        for source, exclude in wanted:
            taken.rows.append(_one(api, cid, source.rstrip("/") or "/", exclude, dst, budget, sanitize))
    out.seek(0)
    return taken


def diff_roots(changes: list[tuple[str, str]], skip: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(the fewest paths whose archives hold every added or changed file, the deleted paths) of a
    container's `docker diff` rows; paths under `skip` prefixes are left out."""
    rows = [(k, p) for k, p in changes if not p.startswith(skip)]
    added = {p for k, p in rows if k == "A"}
    parents = {posixpath.dirname(p) for _, p in changes}  # a changed folder is never taken whole

    def under_added(p: str) -> bool:
        d = posixpath.dirname(p)
        while d not in ("/", ""):
            if d in added:
                return True
            d = posixpath.dirname(d)
        return False

    roots = [p for k, p in rows if k in "AC" and not under_added(p) and (k == "A" or p not in parents)]
    return sorted(set(roots)), sorted(p for k, p in rows if k == "D" and not under_added(p))


def put(api: Any, cid: str, taken: Taken) -> None:
    """Extract the sanitized archive at / of container `cid` (Docker creates missing parent
    folders; existing ones keep their modes)."""
    try:
        taken.data.seek(0)
        api.put_archive(cid, "/", taken.data.read())
    except docker.errors.APIError as e:
        raise SandboxError(f"cannot put the artifacts into the verifier's container: {e}") from None
    except requests.exceptions.RequestException as e:
        raise SandboxUnavailable(f"lost the Docker daemon while putting the artifacts in: {e}") from None


def _one(api: Any, cid: str, source: str, exclude: list[str], dst: tarfile.TarFile, budget: list[int],
         sanitize: bool = True) -> dict[str, Any]:
    row: dict[str, Any] = {"source": source, "files": 0, "bytes": 0, "sha256": None, "skipped": 0}
    try:
        stream, _stat = api.get_archive(cid, source)
    except docker.errors.NotFound:
        row["missing"] = True
        return row
    except docker.errors.APIError as e:
        raise SandboxError(f"cannot read artifact {source} from the agent's container: {e}") from None
    except requests.exceptions.RequestException as e:
        raise SandboxUnavailable(f"lost the Docker daemon while reading artifact {source}: {e}") from None
    spool = tempfile.SpooledTemporaryFile(max_size=64 << 20)  # noqa: SIM115 - closed in the finally below
    try:
        for chunk in stream:
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise ArtifactRefused(f"the artifacts are larger than {MAX_ARTIFACT_BYTES >> 20} MiB "
                                      f"(at {source}): not given to the verifier")
            spool.write(chunk)
        spool.seek(0)
        digest = hashlib.sha256()
        parent = posixpath.dirname(source)
        with tarfile.open(fileobj=spool, mode="r:") as src:
            for member in src:
                rel = member.name
                if any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(posixpath.basename(rel), pat) for pat in exclude):
                    continue
                try:  # Python's own rules for extracting untrusted archives
                    safe = tarfile.data_filter(member, "/nonexistent-root") if sanitize else member
                except tarfile.FilterError:
                    row["skipped"] += 1
                    continue
                safe = safe.replace(name=posixpath.join(parent, rel).lstrip("/"), uid=member.uid, gid=member.gid,
                                    uname=member.uname, gname=member.gname, deep=False)  # owners kept
                if safe.mode is None:  # the filter leaves a link's mode alone: none of its bits matter
                    safe = safe.replace(mode=member.mode & 0o777 & ~0o022, deep=False)
                if safe.islnk():  # a hard link names its target by archive path: re-root it too
                    safe = safe.replace(linkname=posixpath.join(parent, safe.linkname).lstrip("/"), deep=False)
                body = src.extractfile(member) if member.isfile() else None
                dst.addfile(safe, body)
                digest.update(f"{safe.name}\0{safe.type!r}\0{safe.mode:o}\0{safe.linkname}\0".encode())
                if body is not None:
                    body.seek(0)
                    while block := body.read(1 << 20):
                        digest.update(block)
                    row["files"] += 1
                    row["bytes"] += member.size
        row["sha256"] = digest.hexdigest()
    except tarfile.TarError as e:
        raise SandboxError(f"artifact {source}: the daemon's archive is unreadable: {e}") from None
    finally:
        spool.close()
    return row


def restore(api: Any, cid: str, data: Any) -> None:
    """Put a kept archive (ArtifactStore) back at / of container `cid` (a regrade's fresh one)."""
    put(api, cid, Taken(data))
