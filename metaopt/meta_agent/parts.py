"""The composition root: what an experiment runs with besides its RunConfig (the store, tracing,
the sandbox backend, the trial executor, the proposer, and where its progress goes), put together
in one place, `assemble(cfg, store)`, for the CLI and the API alike (tests build their own Parts).

    parts = assemble(cfg, Path(".metaopt/metaopt.duckdb"))
    try:
        report = open_experiment(plan_experiment(cfg, "minimal"), parts).run()
    finally:
        parts.close()
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metaopt.evaluation import TrialResult
    from metaopt.evaluation.runner import Executor
    from metaopt.meta_agent.config import RunConfig
    from metaopt.meta_agent.proposers import Proposer
    from metaopt.sandbox.base import Backend
    from metaopt.traces.store import Store
    from metaopt.traces.tracing import Tracing


def _quiet(_: Any) -> None:
    return None


@dataclass
class Parts:
    """An experiment's collaborators. `close()` ends what assemble opened for it (tracing, and the
    store when it opened that too); parts handed in are left to whoever made them."""

    store: Store
    backend: Backend | None
    """The sandbox backend (sandbox.docker.DockerBackend, LocalBackend, ...); None only where no
    trial runs here (a cluster's nodes have the daemons)."""
    tracing: Tracing | None = None
    """traces.tracing.Tracing for the store; None: trials and proposals record no spans."""
    executor: Executor | None = None
    """Where trials run; None: run_eval's local thread pool."""
    proposer: Proposer | None = None
    """None: the proposer RunConfig.meta_model names."""
    on_event: Callable[[str], None] = _quiet
    """Each line the run reports (a decision, a stop, an estimate)."""
    on_trial: Callable[[TrialResult], None] = _quiet
    """Each trial as it ends."""
    closes: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        """End what was opened for these parts, last opened first."""
        while self.closes:
            self.closes.pop()()


def sandbox_backend(executor: str = "local", image_map: Path | None = None) -> Any:
    """The Docker backend (checked now: no daemon is SandboxUnavailable). With executor ray the
    nodes have the daemons: without one here, only the image map is kept (for the nodes)."""
    from types import SimpleNamespace

    from metaopt.core.errors import SandboxUnavailable, UserError
    from metaopt.sandbox.docker import DockerBackend
    from metaopt.sandbox.images import ImageMap

    try:
        imap = ImageMap.load(image_map)
    except (OSError, ValueError) as e:
        raise UserError(str(e), field="--image-map") from None
    try:
        b = DockerBackend(image_map=imap)
        b.ping()
    except SandboxUnavailable:
        if executor == "local":
            raise
        return SimpleNamespace(image_map=imap, prune=lambda *a, **k: {})
    return b


def assemble(cfg: RunConfig, store: Store | Path, *, backend: Backend | None = None, executor: Executor | None = None,
             tracing: Tracing | None = None, proposer: Proposer | None = None,
             on_event: Callable[[str], None] = _quiet, on_trial: Callable[[TrialResult], None] = _quiet) -> Parts:
    """The one place a run of `cfg` is put together, for `metaopt run` and metaopt.run_experiment:
    the sandbox backend (sandbox_backend, checked now), the executor cfg names, the proposer of
    cfg.meta_model, then the store (opened here when `store` is a path: after every check, so a
    bad input leaves no store behind) and tracing into it. Whatever is given is used as it is.
    Raises UserError (or SandboxUnavailable) before anything is opened; Parts.close() ends what
    was opened here."""
    from metaopt.evaluation.executor import make_executor
    from metaopt.meta_agent.proposers import get_proposer
    from metaopt.traces.store import Store
    from metaopt.traces.tracing import Tracing

    backend = sandbox_backend(cfg.executor) if backend is None else backend
    if executor is None:
        executor = make_executor(cfg.executor, cfg.ray_address, image_map=getattr(backend, "image_map", None))
    proposer = get_proposer(cfg.meta_model) if proposer is None else proposer
    parts = Parts(store if isinstance(store, Store) else Store(store), backend, tracing, executor, proposer,
                  on_event, on_trial)
    if not isinstance(store, Store):
        parts.closes.append(parts.store.close)
    if tracing is None:
        parts.tracing = Tracing.for_store(parts.store)
        parts.closes.append(parts.tracing.shutdown)
    return parts
