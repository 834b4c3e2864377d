"""Multi-container tasks: a task's compose file (TB1 `docker-compose.yaml`, Harbor
`environment/docker-compose.yaml`) read into the agent's service and the others (Task.environment).

Compose's own rules where they apply: values are interpolated (`${VAR}`, `${VAR:-default}`,
`${VAR-default}`, `$$`) from the variables the harness defines (TB1's `T_BENCH_*`, Harbor's
`MAIN_IMAGE_NAME`, `CONTEXT_DIR`, ...), never from the host's environment; a build context is
relative to the compose file; `depends_on` is a list or a map of conditions. What cannot run
faithfully here is refused as a load error naming the service and key: volumes, build args and
targets, privileges, a service depending on the agent's. Networks collapse into one per trial
(every service reaches every other by name); published ports are moot (nothing outside the
trial's network talks to it) and are ignored, as are names, restart policies and labels.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from metaopt.benchmarks.task import Healthcheck, Service
from metaopt.core.errors import TaskFormatError

IGNORED = {"container_name", "ports", "expose", "restart", "labels", "tty", "stdin_open", "pull_policy", "platform",
           "networks", "stop_grace_period", "stop_signal"}
SERVICE_KEYS = IGNORED | {"image", "build", "command", "entrypoint", "environment", "healthcheck", "depends_on",
                          "working_dir", "user", "hostname", "init", "cpus", "mem_limit", "deploy"}
MAIN_KEYS = IGNORED | {"image", "build", "command", "environment", "depends_on", "volumes", "init", "hostname"}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}

_VAR = re.compile(r"\$(?:(?P<esc>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
                  r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|ns|m|s)")


@dataclass
class Compose:
    """A read compose file: the agent's service (`main`: its build and environment) and the others."""

    main: str
    main_build: dict[str, Any] | None = None
    main_env: dict[str, str] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)


def read(path: Path, main: str, variables: dict[str, str]) -> Compose:
    """Read `path` with `main` as the agent's service. Raises TaskFormatError naming the file,
    the service and the key it cannot run."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise TaskFormatError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict):
        raise TaskFormatError(f"{path}: no 'services' mapping")
    doc = interpolate(doc, variables)
    names = [str(n) for n in doc["services"]]
    if main == "client" and main not in names:  # TB1 builds the agent's container from it (Harbor from its base)
        raise TaskFormatError(f"{path}: no 'client' service")
    single = names in ([main], [])  # the template: nothing of it but the agent's build is used
    for key, value in ({} if single else doc).items():
        if key == "volumes" and value:
            raise TaskFormatError(f"{path}: top-level volumes are not supported (services share no volumes here)")
        if key not in ("services", "networks", "volumes", "version", "name") and not str(key).startswith("x-"):
            raise TaskFormatError(f"{path}: top-level key '{key}' is not supported")
    out = Compose(main=main)
    for name, svc in doc["services"].items():
        name, svc = str(name), svc or {}
        if not isinstance(svc, dict):
            raise TaskFormatError(f"{path}: services.{name}: expected a mapping")
        where = f"{path}: services.{name}"
        allowed = MAIN_KEYS if name == main else SERVICE_KEYS
        for key in () if single else svc:
            if key not in allowed:
                raise TaskFormatError(f"{where}.{key} is not supported"
                                      + (" on the agent's service" if name == main else ""))
        depends = {} if single else _depends_on(svc.get("depends_on"), names, where)
        if name == main:  # only its build context and Dockerfile matter (and its environment, with services)
            build = svc.get("build", ".")
            build = {"context": build} if isinstance(build, str) else build if isinstance(build, dict) else {}
            out.main_build = {"context": str(build.get("context") or "."),
                              "dockerfile": str(build.get("dockerfile") or "Dockerfile")} if "build" in svc else None
            out.main_env = {} if single else _env(svc.get("environment"), where)
            continue
        if main in depends:
            raise TaskFormatError(f"{where}.depends_on: a service depending on the agent's service ('{main}') "
                                  "is not supported")
        build = _build(svc["build"], where) if "build" in svc else None
        if build is None and not svc.get("image"):
            raise TaskFormatError(f"{where}: needs an image or a build")
        context = None
        if build is not None:
            context = (path.parent / build["context"]).resolve()
            if not context.is_relative_to(path.parent.resolve()):
                raise TaskFormatError(f"{where}.build.context: {build['context']} is outside the task directory")
            if not (context / build["dockerfile"]).is_file():
                raise TaskFormatError(f"{where}.build: {context / build['dockerfile']} is missing")
        limits = ((svc.get("deploy") or {}).get("resources") or {}).get("limits") or {}
        memory = svc.get("mem_limit") or limits.get("memory")
        cpus = svc.get("cpus") or limits.get("cpus")
        out.services.append(Service(
            name=name, image=svc.get("image") or None, context_dir=context,
            dockerfile=build["dockerfile"] if build else "Dockerfile",
            command=_argv(svc.get("command"), f"{where}.command"), entrypoint=_argv(svc.get("entrypoint"), f"{where}.entrypoint"),
            env=_env(svc.get("environment"), where), workdir=svc.get("working_dir"),
            user=str(svc["user"]) if svc.get("user") is not None else None,
            aliases=[str(svc["hostname"])] if svc.get("hostname") else [],
            healthcheck=_healthcheck(svc.get("healthcheck"), where), depends_on=depends, init=bool(svc.get("init")),
            cpus=float(cpus) if cpus else None, memory_mb=_memory_mb(memory, where) if memory else None))
    _acyclic(out.services, path)
    return out


def interpolate(value: Any, variables: dict[str, str]) -> Any:
    """Compose's variable substitution over every string in `value`; unknown variables are empty."""
    if isinstance(value, dict):
        return {k: interpolate(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, variables) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        if m["esc"]:
            return "$"
        name = m["braced"] or m["bare"]
        have, op, arg = name in variables, m["op"] or "", m["arg"] or ""
        val = variables.get(name, "")
        if op in (":-", "-"):
            return val if (val if op == ":-" else have) else arg
        if op in (":+", "+"):
            return arg if (val if op == ":+" else have) else ""
        if op in (":?", "?") and not (val if op == ":?" else have):
            raise TaskFormatError(f"compose variable {name} is required: {arg or 'unset'}")
        return val

    return _VAR.sub(sub, value)


def _build(build: Any, where: str) -> dict[str, Any]:
    if isinstance(build, str):
        return {"context": build, "dockerfile": "Dockerfile"}
    if not isinstance(build, dict):
        raise TaskFormatError(f"{where}.build: expected a path or a mapping")
    for key in build:
        if key not in ("context", "dockerfile"):
            raise TaskFormatError(f"{where}.build.{key} is not supported")
    return {"context": str(build.get("context") or "."), "dockerfile": str(build.get("dockerfile") or "Dockerfile")}


def _argv(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return shlex.split(value)
    if isinstance(value, list):
        return [str(v) for v in value]
    raise TaskFormatError(f"{where}: expected a string or a list")


def _env(value: Any, where: str) -> dict[str, str]:
    """A list of `K=V` (a bare `K` would come from the host's environment: left out) or a map."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return dict(str(x).split("=", 1) for x in value if "=" in str(x))
    raise TaskFormatError(f"{where}.environment: expected a list or a mapping")


def _depends_on(value: Any, names: list[str], where: str) -> dict[str, str]:
    if value is None:
        return {}
    deps = {str(n): "service_started" for n in value} if isinstance(value, list) else None
    if isinstance(value, dict):
        deps = {str(n): str((c or {}).get("condition", "service_started")) for n, c in value.items()}
    if deps is None:
        raise TaskFormatError(f"{where}.depends_on: expected a list or a mapping")
    for n, cond in deps.items():
        if n not in names:
            raise TaskFormatError(f"{where}.depends_on: no service '{n}'")
        if cond not in CONDITIONS:
            raise TaskFormatError(f"{where}.depends_on.{n}: condition '{cond}' is not one of {sorted(CONDITIONS)}")
    return deps


def _healthcheck(value: Any, where: str) -> Healthcheck | None:
    if not value or value.get("disable"):
        return None
    test = value.get("test")
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    if not isinstance(test, list) or not test or test[0] not in ("CMD", "CMD-SHELL", "NONE"):
        raise TaskFormatError(f"{where}.healthcheck.test: expected a string or a list starting CMD, CMD-SHELL or NONE")
    if test[0] == "NONE":
        return None
    opts = {k: _seconds(value[k], f"{where}.healthcheck.{k}") for k in ("interval", "timeout", "start_period")
            if value.get(k) is not None}
    return Healthcheck(test=[str(t) for t in test], retries=int(value.get("retries", 3)),
                       **{f"{k}_s": v for k, v in opts.items()})


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    parts = _DURATION.findall(str(value).strip())
    if not parts or "".join(a + b for a, b in parts) != str(value).strip():
        raise TaskFormatError(f"{where}: cannot read duration '{value}' (e.g. '1m30s')")
    scale = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    return sum(float(n) * scale[u] for n, u in parts)


def _memory_mb(value: Any, where: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(value), flags=re.IGNORECASE)
    if not m:
        raise TaskFormatError(f"{where}: cannot read memory '{value}' (e.g. '512m')")
    scale = {"": 1 / 2**20, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}[m.group(2).lower()]
    return max(1, int(float(m.group(1)) * scale))


def _acyclic(services: list[Service], path: Path) -> None:
    deps = {s.name: set(s.depends_on) for s in services}
    done: set[str] = set()
    while len(done) < len(deps):
        ready = [n for n, d in deps.items() if n not in done and d <= done]
        if not ready:
            raise TaskFormatError(f"{path}: depends_on has a cycle among {sorted(set(deps) - done)}")
        done.update(ready)
