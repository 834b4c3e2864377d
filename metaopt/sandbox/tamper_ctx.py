"""What a tamper rule sees and what it finds (sandbox.tamper runs the rules of
sandbox.tamper_rules and sandbox.tamper_content over a container's changes):

    Scope     what the verifier will run (its workdir, home, PATH, test directory, ...)
    Evidence  one finding: rule, path, change, detail, hashes
    Ctx       the changes, cached readers for the container and its pristine image, and the
              legitimacy checks (package databases, known wheels)

Below the rules, so they name these types without importing the scan that runs them.
"""

from __future__ import annotations

import base64
import io
import posixpath
import time
import zipfile
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from metaopt.core.errors import ScanExhausted
from metaopt.sandbox import forensics as fx

if TYPE_CHECKING:
    from metaopt.sandbox.docker_sandbox import DockerSandbox


def CACHES(home: str) -> tuple[str, ...]:
    """Installer caches uv and pip would reuse for the verifier (a poisoned cached wheel wins)."""
    return (f"{home}/.cache/uv", f"{home}/.cache/pip")


@dataclass(frozen=True)
class Evidence:
    """One finding. change: added | changed | deleted | runtime."""

    rule: str
    path: str
    change: str
    detail: str
    sha256: str | None = None
    pristine_sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Scope:
    """What the verifier will run: its working directory, its user's home, its PATH (in order),
    extra Python path entries, its test directory, its reward directory, the top-level modules
    its test files import, and paths the runner itself created (never judged)."""

    workdir: str
    home: str = "/root"
    path_dirs: tuple[str, ...] = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
    python_path: tuple[str, ...] = ()
    test_dir: str = "/tests"
    reward_dir: str = "/logs/verifier"
    test_imports: frozenset[str] = frozenset()
    ignore: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ("/opt/metaopt/wheels",)
    verifier_packages: tuple[str, ...] = ()
    """Top-level Python packages the verifier itself imports (SpreadsheetBench: openpyxl): their
    files must be the image's or a package install's."""
    """Local package sources the verifier's pip and uv install from (UV_FIND_LINKS, PIP_FIND_LINKS)."""


class Ctx:
    """What a rule sees: the changes, cached readers for the container and its pristine image,
    and the legitimacy checks (package databases, known wheels)."""

    def __init__(self, sb: DockerSandbox, scope: Scope, pristine: fx.Pristine, changes: list[tuple[str, str]], *,
                 budget_s: float):
        self.sb, self.scope, self.pristine = sb, scope, pristine
        ign = tuple(scope.ignore) + tuple(CACHES(scope.home))  # caches are deleted, not judged
        self.all_changes = changes
        self.changes = [(k, p) for k, p in changes
                        if not any(p == i or p.startswith(i + "/") for i in ign) and p != "/usr/sbin/docker-init"]
        self.kind = {p: k for k, p in self.changes}
        self.parents = {posixpath.dirname(p) for _, p in self.changes}
        self._cur: dict[tuple[str, int], fx.Entry] = {}
        self._dpkg: dict[str, str] | None = None
        self._record: dict[str, str] | None = None
        self._canon: dict[str, str] = {}
        self.deadline = time.monotonic() + budget_s

    # -- readers ---------------------------------------------------------------------------
    def cur(self, path: str, limit: int = 1 << 20) -> fx.Entry:
        key = (path, limit)
        if key not in self._cur:
            self._spend()
            self._cur[key] = fx.read_entry(self.sb, path, limit=limit)
        return self._cur[key]

    def orig(self, path: str, limit: int = 0) -> fx.Entry:
        self._spend()
        return self.pristine.entry(path, limit=limit)

    def _spend(self) -> None:
        if time.monotonic() > self.deadline:
            raise ScanExhausted

    def is_dir(self, path: str) -> bool:
        return path in self.parents or self.cur(path, 0).kind == "dir"

    def same(self, path: str) -> bool:
        """The path's content (or link target) and kind equal the pristine image's."""
        a, b = self.cur(path, 0), self.orig(path)
        return a.kind == b.kind and a.sha256 == b.sha256 and (a.kind != "file" or a.sha256 is not None)

    def canon(self, d: str) -> str:
        """`d` with a first component that the image makes a symlink (merged /usr: /bin -> usr/bin) resolved."""
        if d not in self._canon:
            parts = d.strip("/").split("/")
            top = self.orig("/" + parts[0])
            out = d
            if top.kind == "link":
                out = posixpath.normpath(posixpath.join("/", top.link, *parts[1:]))
            self._canon[d] = out
        return self._canon[d]

    # -- legitimacy --------------------------------------------------------------------------
    def dpkg_verified(self, path: str) -> bool:
        """dpkg installed this content: its status file changed in this trial and the path's
        md5 equals the one its package's md5sums file now lists."""
        if "/var/lib/dpkg/status" not in self.kind:
            return False
        if self._dpkg is None:
            self._dpkg = {}
            tree, _ = fx.read_tree(self.sb, "/var/lib/dpkg/info", limit=64 << 20)
            for rel, e in tree.items():
                if rel.endswith(".md5sums") and e.data:
                    for line in e.text.splitlines():
                        md5, _, name = line.partition("  ")
                        if name:
                            self._dpkg["/" + name.strip().lstrip("/")] = md5.strip()
        want = self._dpkg.get(path) or self._dpkg.get(path.replace("/usr/", "/", 1))
        return bool(want) and self.cur(path).md5 == want

    def dpkg_owned(self, path: str) -> bool:
        """A package of the pristine image installed this path (a distribution file, not one
        of the task's own)."""
        owned = _dpkg_files(self.pristine)
        return path in owned or path.replace("/usr/", "/", 1) in owned

    def record_verified(self, path: str) -> bool:
        """pip or uv installed this content: a RECORD added or changed in this trial lists the
        path with the file's sha256."""
        if self._record is None:
            self._record = {}
            for k, p in self.changes:
                if k != "D" and p.endswith(".dist-info/RECORD"):
                    site = posixpath.dirname(posixpath.dirname(p))
                    for line in self.cur(p, 4 << 20).text.splitlines():
                        name, _, rest = line.partition(",")
                        h = rest.split(",")[0]
                        if h.startswith("sha256="):
                            raw = base64.urlsafe_b64decode(h[7:] + "=" * (-len(h[7:]) % 4))
                            self._record[posixpath.normpath(posixpath.join(site, name))] = raw.hex()
        want = self._record.get(path)
        return bool(want) and self.cur(path, 0).sha256 == want

    def known_wheel(self, rel: str, sha256: str | None) -> bool:
        """`rel` (a path inside a site directory) has the content of the same member of a wheel
        the image ships in /opt/metaopt/wheels (the offline pytest, pluggy, ... of the base image)."""
        return sha256 is not None and sha256 in _wheel_index(self.pristine).get(rel, ())


_DPKG: dict[int, set[str]] = {}


def _dpkg_files(pristine: fx.Pristine) -> set[str]:
    """Every path the pristine image's dpkg database lists (cached per image)."""
    key = id(pristine)
    if key not in _DPKG:
        tree, _ = pristine.tree("/var/lib/dpkg/info", limit=64 << 20)
        _DPKG[key] = {ln.strip() for rel, e in tree.items() if rel.endswith(".list") and e.data
                      for ln in e.text.splitlines() if ln.startswith("/")}
    return _DPKG[key]


_WHEELS: dict[int, dict[str, set[str]]] = {}


def _wheel_index(pristine: fx.Pristine) -> dict[str, set[str]]:
    """member path -> sha256s of it in the wheels of the pristine image's /opt/metaopt/wheels (cached)."""
    key = id(pristine)
    if key not in _WHEELS:
        import hashlib

        index: dict[str, set[str]] = {}
        tree, _ = pristine.tree("/opt/metaopt/wheels", limit=128 << 20)
        for rel, e in tree.items():
            if rel.endswith(".whl") and e.data and not rel.startswith("uv-"):
                try:
                    with zipfile.ZipFile(io.BytesIO(e.data)) as z:
                        for name in z.namelist():
                            index.setdefault(name, set()).add(hashlib.sha256(z.read(name)).hexdigest())
                except zipfile.BadZipFile:
                    continue
        _WHEELS[key] = index
    return _WHEELS[key]
