"""The verifier's view of a trial's container (sandbox.tamper.Scope): its PATH, PYTHONPATH, HOME,
test and reward directories, what the tests import and where the installers look for wheels."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import TYPE_CHECKING

from metaopt.benchmarks.task import Task
from metaopt.core.errors import SandboxError
from metaopt.sandbox import forensics as fx
from metaopt.sandbox.tamper import Scope

if TYPE_CHECKING:
    from metaopt.sandbox.docker_sandbox import DockerSandbox

REWARD_DIR = "/logs/verifier"
VERIFIER_PACKAGES = {"spreadsheet": ("openpyxl", "et_xmlfile")}
"""Python packages a scorer's in-sandbox verifier imports, by scoring (judged like pytest's own)."""


def build_scope(task: Task, sb: DockerSandbox) -> Scope:
    """The verifier's view: PATH, PYTHONPATH and HOME from the container's configuration (which the
    agent cannot change), else HOME from the image's own /etc/passwd (the agent can edit the
    container's)."""
    v = task.verifier
    try:
        env_list = sb.api.inspect_container(sb.id)["Config"].get("Env") or []
    except Exception as e:  # noqa: BLE001 - docker.errors.APIError or a lost connection: one SandboxError
        raise SandboxError(f"cannot inspect the sandbox: {e}") from None
    env = dict(x.split("=", 1) for x in env_list if "=" in x)
    env.update(v.env)
    path = env.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    home = env.get("HOME") or _home(sb, v.user)  # the task's, the image's ENV, else the image's passwd
    dests = [d for _, d in v.files]
    tops = {"/" + d.strip("/").split("/")[0] for d in dests}
    test_dir = tops.pop() if len(tops) == 1 else "/tests"
    return Scope(workdir=task.workdir or "/", home=home, path_dirs=tuple(p for p in path.split(":") if p.startswith("/")),
                 python_path=tuple(p for p in env.get("PYTHONPATH", "").split(":") if p.startswith("/")),
                 test_dir=test_dir, reward_dir=REWARD_DIR, test_imports=_test_imports(task),
                 verifier_packages=VERIFIER_PACKAGES.get(task.scoring, ()),
                 find_links=tuple(sorted({"/opt/metaopt/wheels", *(d.rstrip("/") for k in ("UV_FIND_LINKS", "PIP_FIND_LINKS")
                                          for d in re.split(r"[\s,]+", env.get(k, "")) if d.startswith("/"))})))


def _home(sb: DockerSandbox, user: str) -> str:
    text = fx.Pristine.of(sb).entry("/etc/passwd", limit=1 << 20).text
    for line in text.splitlines():
        f = line.split(":")
        if len(f) >= 6 and (f[0] == user or f[2] == user):
            return f[5] or "/"
    return "/root" if user in ("root", "0") else "/"


def _test_imports(task: Task) -> frozenset[str]:
    names: set[str] = set()
    for host, _ in task.verifier.files:
        host = Path(host)
        for p in (sorted(host.rglob("*.py")) if host.is_dir() else [host] if host.suffix == ".py" else []):
            try:
                tree = ast.parse(p.read_text(errors="replace"))
            except (SyntaxError, ValueError, OSError):
                continue
            for n in ast.walk(tree):
                if isinstance(n, ast.Import):
                    names |= {a.name.split(".")[0] for a in n.names}
                elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                    names.add(n.module.split(".")[0])
    return frozenset(names)
