"""The embedded llama.cpp server behind `local/` models (xllamacpp, in this process).

One server per (GGUF file, settings) per process, started on first use under a lock and shared
by every episode and thread that asks for the same model; bound to 127.0.0.1 on a port the OS
picks (port 0), so it is never reachable from outside the machine and never collides. It runs
on llama.cpp's own threads inside this process: when the process ends, it ends (there is no
child process to leak). `stop_all()` runs at interpreter exit, which also covers Ctrl-C and the
CLI's SIGTERM handler (both end the process through normal exit).

Settings come from LocalSettings (defaults below; environment variables METAOPT_LOCAL_*).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from metaopt.core.errors import MissingExtra, ModelConfigError

RUNTIME = "xllamacpp"
RUNTIME_VERSION = "2026.10.11549"
TEMPLATES = Path(__file__).with_name("templates")
FENCED_TEMPLATE = TEMPLATES / "qwen2.5-fenced-tools.jinja"
ENV_PREFIX = "METAOPT_LOCAL_"


@functools.lru_cache(maxsize=1)  # once per process: settings are part of a server's identity
def _default_threads() -> int:
    """The CPUs this process may use that are not busy now (at least 1). llama.cpp's threads wait
    for each other at every step: on a loaded machine (load 13 on 2 cores) 2 threads were 2.5-5x
    slower than 1, because a descheduled thread stalls the others."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        idle = cpus - os.getloadavg()[0]
    except OSError:
        idle = cpus
    return max(1, min(cpus, round(idle + 0.5)))


class LocalSettings(BaseModel):
    """How the embedded server runs. Each field can be set by METAOPT_LOCAL_<FIELD> (upper case).
    The harness's model section still applies per request: its temperature, when set, replaces
    the default below, and its max_tokens bounds every reply."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ctx: int = Field(default=8192, ge=512)
    """Context window per slot, in tokens (prompt + reply). A request that does not fit is refused
    by the server (a model error naming this setting)."""
    parallel: int = Field(default=2, ge=1, le=16)
    """Slots: requests decoded together (continuous batching); more concurrent episodes queue."""
    threads: int = Field(default_factory=_default_threads, ge=1)
    """CPU threads for generation and prompt processing (default: the CPUs this process may use
    that were idle when this process first asked, at least 1)."""
    temperature: float = Field(default=0.7, ge=0)
    """Sampling temperature when the harness sets none (Qwen2.5's recommended 0.7)."""
    top_p: float = Field(default=0.8, gt=0, le=1)
    top_k: int = Field(default=20, ge=0)
    repeat_penalty: float = Field(default=1.05, gt=0)
    seed: int | None = None
    """Sampling seed; None = a random one per server (repeated trials then differ)."""
    template: str = "auto"
    """Chat template: `fenced` (metaopt's Qwen2.5 template with tool calls as fenced JSON),
    `builtin` (the one inside the GGUF), a path to a .jinja file, or `auto` (fenced for the
    pinned Qwen2.5 models, builtin for a GGUF of your own)."""
    verbose: bool = False
    """Let llama.cpp log to stderr."""

    @classmethod
    def from_env(cls, **overrides: Any) -> LocalSettings:
        """Defaults, then METAOPT_LOCAL_* variables, then `overrides`. ModelConfigError names a bad
        variable."""
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = os.environ.get(ENV_PREFIX + name.upper())
            if raw is not None and raw.strip():
                values[name] = raw.strip() if name != "verbose" else raw.strip().lower() in ("1", "true", "yes", "on")
        try:
            return cls(**{**values, **overrides})
        except ValidationError as e:
            err = e.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else "?"
            source = f"{ENV_PREFIX}{field.upper()}" if field in values and field not in overrides else field
            raise ModelConfigError(f"{source}: {err['msg']} (got {values.get(field, overrides.get(field))!r})") from None

    def template_text(self, pinned: bool) -> str | None:
        """The chat template to pass to the server, or None for the GGUF's own."""
        choice = self.template
        if choice == "auto":
            choice = "fenced" if pinned else "builtin"
        if choice == "builtin":
            return None
        path = FENCED_TEMPLATE if choice == "fenced" else Path(choice).expanduser()
        try:
            return path.read_text()
        except OSError as e:
            raise ModelConfigError(f"{ENV_PREFIX}TEMPLATE: cannot read chat template {path}: {e.strerror}") from None


class LocalServer:
    """A started llama.cpp server: `base_url` (http://127.0.0.1:PORT/v1), `load_s` (seconds to
    load the model), `context_window` (tokens per slot, as the server reports it). `stop()` ends
    it and frees its port."""

    def __init__(self, path: Path, settings: LocalSettings, *, alias: str, pinned: bool):
        try:
            import xllamacpp
        except ImportError:
            raise MissingExtra("local/ models (llama.cpp runtime)", "local", RUNTIME) from None
        p = xllamacpp.CommonParams()  # pyright: ignore[reportAttributeAccessIssue] - compiled module, no stubs
        p.model.path = str(path)
        p.model_alias = {alias}
        p.hostnames = ["127.0.0.1"]
        p.port = 0  # the OS picks a free port; the server reports it
        p.n_parallel = settings.parallel
        p.n_ctx = settings.ctx * settings.parallel  # split evenly: each slot gets `ctx`
        p.kv_unified = False
        p.cpuparams.n_threads = settings.threads
        p.cpuparams_batch.n_threads = settings.threads
        p.sampling.temp = settings.temperature
        p.sampling.top_p = settings.top_p
        p.sampling.top_k = settings.top_k
        p.sampling.penalty_repeat = settings.repeat_penalty
        if settings.seed is not None:
            p.sampling.seed = settings.seed
        p.verbosity = 3 if settings.verbose else -1
        template = settings.template_text(pinned)
        if template is not None:
            p.chat_template = template
        p.use_jinja = True
        t0 = time.monotonic()
        try:
            self._server: Any = xllamacpp.Server(p)  # pyright: ignore[reportAttributeAccessIssue] - compiled module, no stubs
        except Exception as e:  # noqa: BLE001 - llama.cpp says little more than "failed to init"
            raise ModelConfigError(f"llama.cpp could not load {path} ({e}); set {ENV_PREFIX}VERBOSE=1 to see "
                                   f"its log, or lower {ENV_PREFIX}CTX") from None
        self.address: str = self._server.listening_address
        _wait_for_loop(self.address)
        self.load_s = time.monotonic() - t0
        self.base_url = self.address + "/v1"
        self.port = int(self.address.rsplit(":", 1)[1])
        self.path, self.settings, self.alias = path, settings, alias
        self.runtime_version = getattr(xllamacpp, "__version__", "?")
        props = self.call("/props")
        self.context_window: int = int(props.get("default_generation_settings", {}).get("n_ctx") or settings.ctx)

    def call(self, path: str, body: dict[str, Any] | None = None, timeout_s: float = 60.0) -> dict[str, Any]:
        """GET (no body) or POST one of llama.cpp's own endpoints (/props, /tokenize,
        /apply-template) and return its JSON. OSError (urllib's HTTPError included) when it fails."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.address + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout_s) as r:
            return json.loads(r.read())

    @property
    def running(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        """Stop the server: dropping the last reference runs its destructor, which ends llama.cpp's
        loop and HTTP threads and waits for them."""
        self._server = None

    def __repr__(self) -> str:
        return f"LocalServer({self.alias!r}, {self.address if self.running else 'stopped'})"


def _wait_for_loop(address: str, timeout_s: float = 120.0) -> None:
    """Return once llama.cpp's task loop answers. Stopping a server whose loop has not started
    yet hangs for good (its terminate() is lost when the loop then starts), so a server is handed
    out only after one request went through the loop: GET /slots is served by it."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(address + "/slots", timeout=timeout_s) as r:
                r.read()
                return
        except OSError as e:
            if time.monotonic() > deadline:
                raise ModelConfigError(f"the llama.cpp server at {address} did not answer: {e}") from None
            time.sleep(0.05)


_servers: dict[tuple[str, LocalSettings, str], LocalServer] = {}
_lock = threading.Lock()
_atexit_registered = False


def shared_server(path: Path, settings: LocalSettings, *, alias: str, pinned: bool) -> LocalServer:
    """The running server for this model and settings, started now if there is none. Thread-safe:
    concurrent callers wait for the one start."""
    global _atexit_registered
    key = (str(path), settings, alias)
    with _lock:
        server = _servers.get(key)
        if server is None or not server.running:
            server = _servers[key] = LocalServer(path, settings, alias=alias, pinned=pinned)
            if not _atexit_registered:
                atexit.register(stop_all)
                _atexit_registered = True
        return server


def running_servers() -> list[LocalServer]:
    with _lock:
        return [s for s in _servers.values() if s.running]


def stop_all() -> None:
    """Stop every server this process started (registered with atexit)."""
    with _lock:
        servers = list(_servers.values())
        _servers.clear()
    for server in servers:
        server.stop()
