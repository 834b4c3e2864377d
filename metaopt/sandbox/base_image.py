"""Build the metaopt base image from Debian packages, with no image registry at all.

`metaopt sandbox base` calls `build_base_image`. Steps:

1. `debootstrap --variant=minbase` a Debian suite into a temporary directory (the apt lists are kept,
   so `apt-get install -y curl` succeeds offline when curl is already installed);
2. stream the rootfs into Docker as an image (`docker import`, through the SDK);
3. meanwhile, on the host, `pip download` the wheels the benchmark test scripts ask for (uv, pytest
   8.4.1 / 8.4.2 and their dependencies, pytest-json-ctrf; see sandbox.base_wheels);
4. build the final image FROM the imported rootfs: wheels in /opt/metaopt/wheels, the uv and uvx
   binaries in /usr/local/bin and /root/.local/bin, /root/.local/bin/env (what the uv installer
   writes), and an environment that points uv and pip at the local wheels and never at the network.

With that image the Terminal-Bench 1.x test template (`apt-get update; apt-get install -y curl;
curl ... astral.sh/uv/... | sh; source $HOME/.local/bin/env; uv init; uv add pytest==8.4.1;
uv run pytest ... -rA`) and the Terminal-Bench 2 pattern (`uvx -w pytest==8.4.1 -w
pytest-json-ctrf==0.3.5 pytest --ctrf ...`) both run inside a `--network none` container: the
network steps fail quietly and uv resolves from the baked wheels.

Every failure the caller can act on is a RuntimeError with a one-line message naming the cause.
"""

from __future__ import annotations

import datetime as _dt
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from metaopt.sandbox.base_wheels import download_wheels, uv_binaries

if TYPE_CHECKING:  # pragma: no cover
    import docker

DEFAULT_TAG = "metaopt-base:latest"

# What the rootfs gets. Names missing from the suite are dropped (debootstrap says which).
BASE_PACKAGES: tuple[str, ...] = (
    "bash", "coreutils", "python3", "python3-pytest", "python3-venv", "python3-pip", "tmux", "git",
    "curl", "ca-certificates", "build-essential", "sqlite3", "python3-openpyxl", "procps", "jq",
    "less", "vim-tiny", "file", "unzip", "zip", "xz-utils",
)

WHEELS_DIR = "/opt/metaopt/wheels"

# The file the uv installer writes; `source $HOME/.local/bin/env` puts ~/.local/bin on PATH.
UV_ENV_SCRIPT = """#!/bin/sh
# add binaries to PATH if they aren't added yet
# affix colons on either side of $PATH to simplify matching
case ":${PATH}:" in
    *:"$HOME/.local/bin":*)
        ;;
    *)
        # Prepending path in case a system-installed binary needs to be overridden
        export PATH="$HOME/.local/bin:$PATH"
        ;;
esac
"""

IMAGE_ENV: dict[str, str] = {
    "UV_OFFLINE": "1",
    "UV_FIND_LINKS": WHEELS_DIR,
    "UV_PYTHON_DOWNLOADS": "never",
    "UV_PYTHON_PREFERENCE": "only-system",
    "PIP_NO_INDEX": "1",
    "PIP_FIND_LINKS": WHEELS_DIR,
    "PIP_BREAK_SYSTEM_PACKAGES": "1",
    "DEBIAN_FRONTEND": "noninteractive",
}

APT_CONF = 'Acquire::Retries "0";\\n'

LABELS: dict[str, str] = {"metaopt.managed": "true", "metaopt.base": "1"}

_MISSING_DEBS = re.compile(r"Couldn't find these debs:\s*(.+)")
_PER_PACKAGE = re.compile(r"^I: \w+ \S+\.\.\.$")  # "I: Configuring python3-pip..."


def build_base_image(
    tag: str = DEFAULT_TAG,
    *,
    suite: str = "bookworm",
    mirror: str = "http://deb.debian.org/debian",
    extra_packages: Iterable[str] = (),
    progress: Callable[[str], None] | None = None,
    client: docker.DockerClient | None = None,
) -> str:
    """Build the base image, tag it `tag` and `<repo>:<suite>-YYYYMMDD`; return the image id.

    Needs root, `debootstrap`, a Docker daemon, the Debian mirror and PyPI (from the host only).
    Raises RuntimeError with a one-line reason when any of those is missing or a step fails.
    """
    say = progress or (lambda _msg: None)
    _preflight()
    client = _client(client)
    packages = list(dict.fromkeys([*BASE_PACKAGES, *extra_packages]))
    started = time.monotonic()

    with tempfile.TemporaryDirectory(prefix="metaopt-wheels-") as wheel_tmp:
        wheels_dir = Path(wheel_tmp)
        # The wheel download runs on the host while debootstrap works; it takes seconds.
        wheel_result: dict[str, BaseException | None] = {"error": None}

        def fetch() -> None:
            try:
                download_wheels(wheels_dir)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                wheel_result["error"] = exc

        say("downloading wheels (uv, pytest 8.4.1/8.4.2, pytest-json-ctrf) in the background")
        fetcher = threading.Thread(target=fetch, name="metaopt-wheels", daemon=True)
        fetcher.start()

        rootfs = Path(tempfile.mkdtemp(prefix="metaopt-rootfs-"))
        try:
            _debootstrap(rootfs, suite, mirror, packages, say)
            say("importing rootfs into docker")
            rootfs_id = _import_rootfs(client, rootfs, suite)
        finally:
            _remove_rootfs(rootfs, say)

        fetcher.join()
        if wheel_result["error"] is not None:
            err = wheel_result["error"]
            raise err if isinstance(err, RuntimeError) else RuntimeError(f"pip download failed: {err}")

        say("building final image")
        image = _build_final(client, rootfs_id, wheels_dir)

    repo = tag.rsplit(":", 1)[0] if ":" in tag.rsplit("/", 1)[-1] else tag
    dated = f"{repo}:{suite}-{_dt.date.today():%Y%m%d}"
    for name in (tag, dated):
        r, t = name.rsplit(":", 1) if ":" in name.rsplit("/", 1)[-1] else (name, "latest")
        image.tag(r, t)
    say(f"tagged {tag} and {dated} ({image.short_id}) in {time.monotonic() - started:.0f}s")
    if image.id is None:
        raise RuntimeError(f"the daemon gave no id for {tag}")
    return image.id


# ----------------------------------------------------------------------------------- preflight


def _preflight() -> None:
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap not found: install it (apt-get install debootstrap) to build the base image")
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        raise RuntimeError("building the base image needs root: debootstrap must run as root (try sudo)")
    if shutil.which("tar") is None:
        raise RuntimeError("tar not found: it is needed to stream the rootfs into docker")


def _client(client: docker.DockerClient | None) -> docker.DockerClient:
    if client is not None:
        return client
    import docker

    try:
        c = docker.from_env()
        c.ping()
    except Exception as exc:  # docker.errors.DockerException, connection errors
        raise RuntimeError(f"Docker daemon not reachable: {str(exc).splitlines()[0] if str(exc) else exc!r}") from exc
    return c


# ----------------------------------------------------------------------------------- debootstrap


def _debootstrap(
    target: Path, suite: str, mirror: str, packages: list[str], say: Callable[[str], None]
) -> None:
    """debootstrap into `target`; drop packages the suite lacks and retry once per such report."""
    packages = list(packages)
    for _attempt in range(3):
        say(f"debootstrap --variant=minbase {suite} ({len(packages)} packages) from {mirror}")
        cmd = [
            "debootstrap", "--variant=minbase", f"--include={','.join(packages)}",
            suite, str(target), mirror,
        ]
        tail: deque[str] = deque(maxlen=40)
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            tail.append(line)
            # Stage lines only ("I: Configuring the base system..."), not one line per package.
            if line.startswith("I: ") and (line.endswith(("...", "successfully."))) \
                    and not _PER_PACKAGE.match(line):
                say(f"debootstrap: {line[3:]}")
        rc = proc.wait()
        if rc == 0:
            return
        missing = next((m.group(1).split() for m in map(_MISSING_DEBS.search, tail) if m), None)
        if missing and set(missing) & set(packages):
            say(f"debootstrap: {suite} lacks {' '.join(missing)}; retrying without them")
            packages = [p for p in packages if p not in missing]
            _clear_dir(target)
            continue
        last = next((ln for ln in reversed(tail) if ln.startswith(("E:", "W:"))), tail[-1] if tail else "")
        raise RuntimeError(f"debootstrap {suite} from {mirror} failed (exit {rc}): {last.strip()}")
    raise RuntimeError(f"debootstrap {suite} failed: packages kept disappearing from {mirror}")


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve()).rstrip("/") + "/"
    found = []
    try:
        with open("/proc/mounts") as f:
            for line in f:
                mnt = line.split()[1].replace("\\040", " ")
                if mnt.startswith(prefix) or mnt == prefix[:-1]:
                    found.append(mnt)
    except OSError:
        pass
    return sorted(found, key=len, reverse=True)


def _clear_dir(path: Path) -> None:
    for mnt in _mounts_under(path):
        subprocess.run(["umount", "-l", mnt], check=False, capture_output=True)
    if _mounts_under(path):
        raise RuntimeError(f"cannot clean {path}: something is still mounted inside it")
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)


def _remove_rootfs(path: Path, say: Callable[[str], None]) -> None:
    """Remove the temporary rootfs, but never recurse into a mount debootstrap left behind."""
    for mnt in _mounts_under(path):
        subprocess.run(["umount", "-l", mnt], check=False, capture_output=True)
    if _mounts_under(path):
        say(f"warning: left {path} in place: something is still mounted inside it")
        return
    shutil.rmtree(path, ignore_errors=True)


# ----------------------------------------------------------------------------------- import


def _import_rootfs(client: docker.DockerClient, rootfs: Path, suite: str) -> str:
    """Stream `tar -C rootfs -c .` into `docker import`; return the new image id."""
    # Trim what no task needs before shipping it: downloaded .debs and caches.
    for sub in ("var/cache/apt/archives", "var/cache/apt"):
        d = rootfs / sub
        if d.is_dir():
            for p in d.glob("*.bin"):
                p.unlink(missing_ok=True)
            for p in d.glob("*.deb"):
                p.unlink(missing_ok=True)
    proc = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", "-",
         "--exclude=./proc/*", "--exclude=./sys/*", "--exclude=./dev/*", "--exclude=./tmp/*", "."],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    out = proc.stdout
    assert out is not None

    def chunks() -> Iterator[bytes]:
        while True:
            buf = out.read(1 << 20)
            if not buf:
                return
            yield buf

    changes = [f"LABEL {k}={v}" for k, v in LABELS.items()] + [
        f"LABEL metaopt.rootfs={suite}", 'CMD ["bash"]',
    ]
    api = client.api
    saved_timeout = api.timeout
    api.timeout = None  # pyright: ignore[reportAttributeAccessIssue] - no timeout: the daemon answers only when the whole rootfs is in
    try:
        result = api.import_image(src=chunks(), changes=changes, stream_src=True)
    except Exception as exc:
        proc.kill()
        raise RuntimeError(f"docker import of the rootfs failed: {exc}") from exc
    finally:
        api.timeout = saved_timeout
        err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
        rc = proc.wait()
    if rc != 0:
        raise RuntimeError(f"tar of the rootfs failed (exit {rc}): {err.splitlines()[-1] if err else ''}")
    text = result if isinstance(result, str) else str(result)
    m = re.findall(r"sha256:[0-9a-f]{64}", text)
    if not m:
        raise RuntimeError(f"docker import returned no image id: {text.strip()[-200:]}")
    return m[-1]


# ----------------------------------------------------------------------------------- final image


def _dockerfile(rootfs_id: str, binaries: Iterable[str]) -> str:
    bins = sorted(binaries)
    env = " \\\n    ".join(f"{k}={v}" for k, v in IMAGE_ENV.items())
    labels = " ".join(f'{k}="{v}"' for k, v in LABELS.items())
    lines = [
        f"FROM {rootfs_id}",
        f"COPY wheels/ {WHEELS_DIR}/",
        *[f"COPY bin/{b} /usr/local/bin/{b}" for b in bins],
        *[f"COPY bin/{b} /root/.local/bin/{b}" for b in bins],
        "COPY env /root/.local/bin/env",
        "RUN chmod 0755 " + " ".join(f"/usr/local/bin/{b} /root/.local/bin/{b}" for b in bins)
        + " && chmod 0644 /root/.local/bin/env"
        + f" && chmod -R a+rX {WHEELS_DIR}"
        + " && mkdir -p /app /logs/verifier /logs/agent /logs/artifacts"
        # Offline, apt's default 3 retries with back-off make `apt-get update` sit ~8 s per run.
        + f" && printf '{APT_CONF}' > /etc/apt/apt.conf.d/99metaopt"
        + " && apt-cache gencaches > /dev/null"
        + " && uv --version",
        f"ENV {env}",
        "WORKDIR /app",
        f"LABEL {labels}",
        'CMD ["bash"]',
    ]
    return "\n".join(lines) + "\n"


def _build_final(client: docker.DockerClient, rootfs_id: str, wheels_dir: Path):
    binaries = uv_binaries(wheels_dir)
    buf = io.BytesIO()  # ~20 MB: the uv wheel dominates

    def add(tf: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), mode, 0
        tf.addfile(info, io.BytesIO(data))

    with tarfile.open(fileobj=buf, mode="w") as tf:
        add(tf, "Dockerfile", _dockerfile(rootfs_id, binaries).encode())
        add(tf, "env", UV_ENV_SCRIPT.encode())
        for name, data in binaries.items():
            add(tf, f"bin/{name}", data, 0o755)
        for whl in sorted(wheels_dir.glob("*.whl")):
            add(tf, f"wheels/{whl.name}", whl.read_bytes())
    buf.seek(0)

    import docker
    import docker.errors

    try:
        image, _logs = client.images.build(
            fileobj=buf, custom_context=True, rm=True, forcerm=True, pull=False, labels=dict(LABELS)
        )
    except docker.errors.BuildError as exc:
        lines = [str(c.get("stream") or c.get("error") or "").strip() for c in exc.build_log]
        tail = next((ln for ln in reversed(lines) if ln), str(exc))
        raise RuntimeError(f"building the final base image failed: {tail}") from exc
    except docker.errors.APIError as exc:
        raise RuntimeError(f"building the final base image failed: {exc.explanation or exc}") from exc
    return image


if __name__ == "__main__":  # pragma: no cover - manual use: python -m metaopt.sandbox.base_image [TAG]
    import sys

    t0 = time.monotonic()
    try:
        image_id = build_base_image(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_TAG,
                                    progress=lambda m: print(f"[{time.monotonic() - t0:6.1f}s] {m}", flush=True))
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(image_id)
