"""A sample's `files` and `setup` script, baked into its image.

Inspect copies a sample's files into the sandbox and runs its setup script when the sample starts.
Our trial runner starts the container straight from the task's image, so the files and the setup
go into a derived build context instead: the base (an image, or a Dockerfile and its context) plus
`COPY` lines for the files and a `RUN` of the setup script. The context lives in a cache directory
named by its content hash, so the image build cache keeps working across runs. The setup runs at
image build time, where the build has the network Debian's mirror gives it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from metaopt.benchmarks.task import Environment
from metaopt.core.errors import TaskFormatError

DOCKERFILE = "Dockerfile.metaopt-inspect"
STAGE = ".metaopt-inspect"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "metaopt" / "inspect-contexts"


def staged(base: Environment, files: dict[str, str] | None, setup: str | None) -> Environment:
    """`base` with the sample's files (inspect's forms: a path, a data: URI or inline text) and
    setup script added. Raises ValueError for a file that targets another sandbox by name."""
    contents = _read_all(files or {}, setup)
    digest = hashlib.sha256(json.dumps(
        [base.model_dump(mode="json"), _dir_digest(base.context_dir),
         [[k, hashlib.sha256(v).hexdigest()] for k, v in contents.items()]], sort_keys=True).encode()).hexdigest()[:20]
    root = cache_root() / digest
    if not (root / DOCKERFILE).is_file():
        _write(root, base, contents)
    return Environment(context_dir=root, dockerfile=DOCKERFILE)


def _read_all(files: dict[str, str], setup: str | None) -> dict[Any, bytes]:
    """{container path: bytes}, plus the setup script under the key None, read as inspect does."""
    from inspect_ai._eval.task.sandbox import read_sandboxenv_file, resolve_sample_files

    async def read() -> dict[Any, bytes]:
        out: dict[Any, bytes] = {}
        for dest, src in resolve_sample_files(files).items():
            env, sep, path = dest.partition(":")
            if sep and env != "default":
                raise TaskFormatError(f"file {dest!r} targets sandbox '{env}'; metaopt runs one sandbox per sample")
            out[path if sep else dest] = await read_sandboxenv_file(src)
        if setup:
            out[None] = await read_sandboxenv_file(setup)
        return out

    return asyncio.run(read())


def _write(root: Path, base: Environment, contents: dict[Any, bytes]) -> None:
    tmp = root.with_name(f"{root.name}.tmp-{secrets.token_hex(4)}")
    if base.context_dir is not None:
        shutil.copytree(base.context_dir, tmp)
        text = (base.context_dir / base.dockerfile).read_text()
    else:
        tmp.mkdir(parents=True)
        text = f"FROM {base.image}\n"
    (tmp / STAGE).mkdir()
    lines = []
    for i, (dest, data) in enumerate(contents.items()):
        (tmp / STAGE / str(i)).write_bytes(data)
        if dest is None:  # the setup script: run as inspect does (no shebang: sh runs it)
            lines += [f"COPY {json.dumps([f'{STAGE}/{i}', '/tmp/.metaopt-setup'])}",
                      "RUN chmod +x /tmp/.metaopt-setup && /tmp/.metaopt-setup && rm -f /tmp/.metaopt-setup"]
        else:  # relative destinations resolve against WORKDIR, as inspect's against the sandbox cwd
            lines.append(f"COPY {json.dumps([f'{STAGE}/{i}', dest])}")
    (tmp / DOCKERFILE).write_text(text.rstrip("\n") + "\n" + "\n".join(lines) + "\n")
    try:
        os.replace(tmp, root)
    except OSError:  # another process staged the same content first
        shutil.rmtree(tmp, ignore_errors=True)


def _dir_digest(path: Path | None) -> str | None:
    if path is None:
        return None
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()
