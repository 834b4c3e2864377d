"""Image map: where a task's base image cannot be pulled, use a local image instead.

An ImageMap is an ordered list of (pattern, local image). A pattern is an exact reference
(`python:3.11-slim`) or an fnmatch glob (`python:*`, `ghcr.io/laude-institute/t-bench/*`); the
first match wins. `ImageMap.load()` puts a user's entries before the packaged defaults in
`sandbox/image_map.yaml`. `rewrite_from_lines()` applies a map to a Dockerfile's FROM lines;
`context_files/context_digest/context_tar` make the content-hash cache key and the build context,
and `run_build` streams a build through a given docker APIClient. The tar helpers at the end
serve DockerSandbox's file copies. Nothing here talks to Docker unless handed a client.
"""

from __future__ import annotations

import collections
import hashlib
import io
import os
import re
import stat
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml

from metaopt.core.errors import ImageBuildError, ImageNotFound, UserError

DEFAULT_MAP_PATH = Path(__file__).with_name("image_map.yaml")

_FROM = re.compile(
    r"^(?P<head>\s*FROM\s+(?:--\S+\s+)*)(?P<image>\S+)(?P<tail>(?:\s+AS\s+(?P<stage>\S+))?\s*)$",
    re.IGNORECASE,
)
_ARG = re.compile(r"^\s*ARG\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:=(?P<value>\S*))?\s*$", re.IGNORECASE)
_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::?-(?P<default>[^}]*))?\}"
                  r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")


class ImageMap:
    """Ordered (pattern -> local image) entries; `lookup(ref)` returns the first match or None."""

    def __init__(self, entries: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        items = entries.items() if isinstance(entries, Mapping) else entries
        self._entries: list[tuple[str, str]] = [(str(p), str(t)) for p, t in items]

    @classmethod
    def default(cls) -> ImageMap:
        """The packaged map (`sandbox/image_map.yaml`)."""
        return cls(_read_map_file(DEFAULT_MAP_PATH))

    @classmethod
    def load(cls, path: Path | None = None) -> ImageMap:
        """The packaged defaults, with the entries of the YAML file at `path` (a mapping of
        pattern -> image) placed first so they win. Raises ValueError naming the file and the
        bad entry when the file is malformed, FileNotFoundError when it does not exist."""
        default = _read_map_file(DEFAULT_MAP_PATH)
        user = _read_map_file(Path(path)) if path is not None else []
        overridden = {p for p, _ in user}
        return cls(user + [(p, t) for p, t in default if p not in overridden])

    def lookup(self, ref: str) -> str | None:
        """The local image for `ref`, or None. `python` is matched as `python:latest`, and
        `docker.io/library/python:3` as `python:3`."""
        forms = _ref_forms(ref)
        for pattern, target in self._entries:
            if any(fnmatchcase(form, pattern) for form in forms):
                return target
        return None

    def items(self) -> list[tuple[str, str]]:
        return list(self._entries)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ImageMap({dict(self._entries)!r})"


def rewrite_from_lines(
    dockerfile: str, image_map: ImageMap, local_id: Callable[[str], str | None]
) -> tuple[str, list[tuple[str, str, str]]]:
    """Rewrite the FROM lines of `dockerfile` so that every base image is present locally.

    `local_id(ref)` returns the local image id of `ref`, or None when it is absent (any truthy
    value counts as present). A FROM naming an earlier build stage is left alone, as is
    `scratch`; `$VAR` in a FROM is expanded from the ARG defaults declared before it. A present
    image is kept; an absent one is replaced by its mapped image, which must be present.
    Returns (new text, [(image as written, image used, its local id)]) in FROM order.
    Raises ImageNotFound naming the image and how to map it.
    """
    args: dict[str, str] = {}
    stages: set[str] = set()
    bases: list[tuple[str, str, str]] = []
    out: list[str] = []
    seen_from = False
    for line in dockerfile.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        if (arg := _ARG.match(body)) and not seen_from:  # only global ARGs apply to FROM
            args[arg["name"]] = (arg["value"] or "").strip("\"'")
        m = _FROM.match(body)
        if not m:
            out.append(line)
            continue
        seen_from = True
        written = m["image"]
        image = _expand(written, args)
        if image.lower() in stages or image.lower() == "scratch":
            used = image
        else:
            used = resolve(image, image_map, local_id)
            bases.append((written, used, str(local_id(used))))
        if m["stage"]:
            stages.add(m["stage"].lower())
        out.append(m["head"] + used + m["tail"] + ending if used != written else line)
    return "".join(out), bases


def resolve(image: str, image_map: ImageMap, local_id: Callable[[str], str | None]) -> str:
    """`image` if present locally, else its mapped image if that is present; else raises
    ImageNotFound saying how to map it."""
    if local_id(image):
        return image
    target = image_map.lookup(image)
    if target is None:
        raise ImageNotFound(
            f"image {image!r} is not present locally and cannot be pulled here; map it to a "
            f"local image with --image-map FILE (a YAML line such as '\"{image}\": "
            f"metaopt-base:latest')"
        )
    if not local_id(target):
        raise ImageNotFound(
            f"image {image!r} is mapped to {target!r}, which is not present locally either "
            f"(build it, e.g. `metaopt sandbox base`, or change the entry with --image-map FILE)"
        )
    return target


def _expand(image: str, args: Mapping[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m["braced"] or m["bare"]
        value = args.get(name, "")
        return value if value else (m["default"] or "")

    return _VAR.sub(sub, image) if "$" in image else image


def _ref_forms(ref: str) -> list[str]:
    """`ref` as written plus its short form: registry prefix `docker.io/library/` dropped,
    digest dropped, `:latest` added when untagged."""
    short = ref.split("@", 1)[0]
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        short = short.removeprefix(prefix)
    short = short.removeprefix("library/")
    if ":" not in short.rsplit("/", 1)[-1]:
        short += ":latest"
    return [ref] if short == ref else [ref, short]


def _read_map_file(path: Path) -> list[tuple[str, str]]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    if data is None:
        return []
    if not isinstance(data, dict):
        raise UserError(
            f"{path}: an image map must be a mapping of 'pattern: local-image', "
            f"got {type(data).__name__}"
        )
    entries: list[tuple[str, str]] = []
    for pattern, target in data.items():
        if not isinstance(pattern, str) or not pattern.strip():
            raise UserError(f"{path}: bad pattern {pattern!r}: must be a non-empty string")
        if not isinstance(target, str) or not target.strip() or any(c.isspace() for c in target):
            raise UserError(
                f"{path}: bad entry {pattern!r}: {target!r}: the image must be one image "
                f"reference such as 'metaopt-base:latest'"
            )
        entries.append((pattern.strip(), target.strip()))
    return entries


def context_files(context_dir: Path, dockerfile: str) -> list[str]:
    """Relative paths (files, dirs, links) of a build context, .dockerignore applied, sorted.
    The Dockerfile and .dockerignore are always included, as `docker build` does."""
    from docker.utils.build import exclude_paths  # the SDK's own .dockerignore semantics

    ignore = context_dir / ".dockerignore"
    patterns = []
    if ignore.is_file():
        lines = (line.strip() for line in ignore.read_text().splitlines())
        patterns = [line for line in lines if line and not line.startswith("#")]
    return sorted(exclude_paths(str(context_dir), patterns, dockerfile=dockerfile))


def context_digest(context_dir: Path, files: list[str], extra: Iterable[str]) -> str:
    """sha256 over every context entry (path, mode, bytes or link target) and `extra` strings
    (the effective Dockerfile, base image ids, a cache version)."""
    h = hashlib.sha256()
    for item in extra:
        h.update(item.encode() + b"\0")
    for rel in files:
        path = context_dir / rel
        st = path.lstat()
        h.update(f"{rel}\0{st.st_mode:o}\0".encode())
        if stat.S_ISLNK(st.st_mode):
            h.update(os.readlink(path).encode())
        elif stat.S_ISREG(st.st_mode):
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        h.update(b"\0")
    return h.hexdigest()


def context_tar(context_dir: Path, files: list[str], dockerfile: str, text: str) -> io.BytesIO:
    """An in-memory tar of the context with `dockerfile` replaced by `text`; the task dir is
    never touched. Owners are zeroed so the image does not depend on who checked it out."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel in files:
            if rel == dockerfile:
                continue
            info = tar.gettarinfo(str(context_dir / rel), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with (context_dir / rel).open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
        data = text.encode()
        info = tarfile.TarInfo(dockerfile)
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def tar_of(entries: list[tuple[tarfile.TarInfo, Any]]) -> bytes:
    """An uncompressed tar of (member, file object or None) pairs."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, f in entries:
            tar.addfile(info, f)
    return buf.getvalue()


def root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A tarfile.add filter: owned by root, whoever owns it on the host."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def strip_top(top: str) -> Any:
    """A tarfile extraction filter: drop the archive's top directory and refuse escapes."""
    def strip(name: str) -> str | None:
        if name == top or not name.startswith(top + "/"):
            return None
        return name[len(top) + 1:]

    def filt(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        name = strip(member.name)
        if not name:
            return None
        link = strip(member.linkname) if member.islnk() else member.linkname
        try:
            member = tarfile.tar_filter(member.replace(name=name, linkname=link or ""), dest)
        except tarfile.FilterError:
            return None
        return member.replace(uid=None, gid=None, uname=None, gname=None)  # pyright: ignore[reportArgumentType] - None (keep the extracting user's) is documented for filters; typeshed says int/str

    return filt


def run_build(api: Any, context: io.BytesIO, *, tag: str, dockerfile: str,
              labels: dict[str, str], name: str, timeout_s: float) -> None:
    """Build `context` (a tar) with the docker APIClient `api` as `tag`, base images never
    pulled. Raises ImageBuildError whose first line names the failing step (or the timeout),
    followed by the last 20 log lines."""
    import docker.errors
    import requests

    log: collections.deque[str] = collections.deque(maxlen=20)
    step, error = "", ""
    deadline = time.monotonic() + timeout_s
    try:
        for chunk in api.build(fileobj=context, custom_context=True, tag=tag, dockerfile=dockerfile,
                               rm=True, forcerm=True, pull=False, labels=labels, decode=True,
                               timeout=timeout_s):
            for line in chunk.get("stream", "").splitlines():
                if line.strip():
                    log.append(line.rstrip())
                    step = line.strip() if line.startswith("Step ") else step
            if "error" in chunk:
                error = chunk["error"].strip()
                break
            if time.monotonic() > deadline:  # the HTTP timeout only bounds each read
                error = f"timed out after {timeout_s:g} s"
                break
    except docker.errors.APIError as e:
        error = str(e.explanation or e).strip()
    except requests.exceptions.Timeout:
        error = f"timed out after {timeout_s:g} s"
    except requests.exceptions.RequestException as e:
        error = f"lost the Docker daemon ({type(e).__name__})"
    if error:
        where = f"at {step!r}" if step else "before the first step"
        tail = "\n".join(log)
        raise ImageBuildError(f"building image {name!r} failed {where}: {error}\n{tail}".rstrip())
