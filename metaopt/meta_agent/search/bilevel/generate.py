"""A Level-2 round inside the run: the session (level2.py) over the record (record.py), then the
validation ladder (static.py, ladder.py) with a row per step, then, for a module that climbed
every step, its trial (judge.py) starting at this iteration. Never raises for what the model
or the generated code does: every failure is a row and the experiment goes on."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Protocol

from metaopt.core.errors import HostStartError, SandboxError
from metaopt.meta_agent.search.bilevel import judge, level15
from metaopt.meta_agent.search.bilevel.host import DockerHost, ProcessHost
from metaopt.meta_agent.search.bilevel.ladder import LadderInput, contract_step, dry_run_step
from metaopt.meta_agent.search.bilevel.level2 import run_session, spec_mismatch
from metaopt.meta_agent.search.bilevel.live import Live
from metaopt.meta_agent.search.bilevel.record import record_text
from metaopt.meta_agent.search.bilevel.records import Level2Session, MechanismCheck, MechanismRow, level2_rounds
from metaopt.meta_agent.search.bilevel.static import Step, imports_step, parse_step
from metaopt.meta_agent.search.mechanisms import source_hash
from metaopt.meta_agent.search.view import SearchView
from metaopt.traces.store import now

if TYPE_CHECKING:
    from metaopt.meta_agent.search.bilevel.config import BilevelConfig
    from metaopt.meta_agent.search.bilevel.live import Registry
    from metaopt.meta_agent.search.bilevel.snapshot import Snapshot
    from metaopt.task_agent.models.base import Model
    from metaopt.traces.store import Store


class BilevelSearch(Protocol):
    """What a Level-2 round reads and sets of the outer loop (outer.BilevelSearch is the one)."""

    exp: SearchView
    base: Any
    """The base strategy (its select picks the dry run's parent)."""
    cfg: BilevelConfig
    store: Store
    eid: str
    reg: Registry
    iteration: int
    proposer: dict[str, Any]
    params: dict[str, Any]
    model: Any
    """The Level-2 model client (a Model; the round runs only when it is set)."""
    trial: str | None
    plan: dict[str, Any] | None

    def snap(self) -> Snapshot: ...


def level2_model(exp: SearchView) -> tuple[Model | None, str]:
    """(the Level-2 model or None, what the run says about Level 2)."""
    name = exp.cfg.bilevel.level2_model
    if name == "none":
        return None, "off (--level2-model none)"
    if name is None and "/" not in exp.cfg.meta_model:
        return None, (f"off: the meta-model is '{exp.cfg.meta_model}' (no model to write code); Level 1.5 and "
                      "the built-in mechanisms only")
    shared = getattr(exp.proposer, "model", None)
    if shared is not None and (name is None or getattr(shared, "name", None) == name):
        model = shared  # one meta-model: its conversations share one client (and one fake script)
    else:  # a Level-2 model of its own, or a proposer that holds no model client
        from metaopt.task_agent.models import get_model

        model = get_model(name or exp.cfg.meta_model, base_url=exp.cfg.base_url)
    return model, f"every {exp.cfg.bilevel.level2_every} iterations with {model.name}"


def sessions(search: BilevelSearch) -> int:
    return level2_rounds(search.store, search.eid)[0]


def due(search: BilevelSearch, iteration: int) -> bool:
    cfg = search.cfg
    n, last = level2_rounds(search.store, search.eid)
    if n >= cfg.level2_rounds or iteration <= cfg.level2_every:
        return False
    return iteration - (last or 0) >= cfg.level2_every


def static_steps(source: str) -> list[Step]:
    step, tree = parse_step(source)
    return [step] if tree is None else [step, imports_step(tree)]


def make_host(search: BilevelSearch, source: str) -> Any:
    mode = search.cfg.host
    backend = search.exp.backend
    from metaopt.sandbox.docker import DockerBackend

    if mode == "auto":
        mode = "docker" if isinstance(backend, DockerBackend) else "process"
    if mode == "process":
        return ProcessHost(source)
    backend = backend if isinstance(backend, DockerBackend) else DockerBackend()
    run_id = f"{search.eid}/mechanisms"
    search.store.begin_run(run_id, benchmark=search.exp.cfg.benchmark, agent="mechanism-host", dataset=None, args={})
    return DockerHost(source, backend, run_id)


def end_host_run(search: BilevelSearch) -> None:
    search.store.end_run(f"{search.eid}/mechanisms", "finished", unless_finished=True)


def level2_round(search: BilevelSearch, views: list) -> None:
    exp, store, eid, cfg, it = search.exp, search.store, search.eid, search.cfg, search.iteration
    n = sessions(search) + 1
    sid = f"{eid}/level2-{n}"
    snap = search.snap()
    exp.say(f"  level 2 (round {n}): one session with {search.model.name} over the record of "
            f"{len(snap.history)} candidates")
    started = now()
    text = record_text(store, eid, snap, proposer=search.proposer, iteration=it, max_chars=cfg.record_chars)
    s = run_session(search.model, text, search.proposer, static_steps)
    if s.usd:
        exp.charge(f"level 2 session {n}", s.usd)
    spec = s.spec.model_dump() if s.spec else None
    for k, (src, steps) in enumerate(s.attempts, 1):
        h = source_hash(src)
        name = steps[0].detail.get("name") or (s.spec.name if s.spec else "unnamed")
        search.reg.add(MechanismRow(experiment_id=eid, mechanism_hash=h, name=str(name), origin="generated", source=src,
                                    spec=spec, session_id=sid, status="validating", created_at=now(), updated_at=now()))
        _rows(search, h, steps, k)
        bad = next((x for x in steps if not x.ok), None)
        if bad or src != s.source:
            why = (f"{bad.step}: {bad.reason}" if bad else
                   f"spec: {spec_mismatch(s.spec, steps) if s.spec else 'no spec was parsed'}")
            search.reg.set_status(h, "refused", why)
    h = source_hash(s.source) if s.source else None
    store.insert(Level2Session(session_id=sid, experiment_id=eid, round=n, iteration=it, model=search.model.name,
                               outcome=s.outcome, errors=s.errors, spec=spec, mechanism_hash=h,
                               messages=s.transcript(), usd=s.usd, started_at=started, finished_at=now()))
    if s.outcome != "module" or h is None or s.source is None:  # a module always has its source
        exp.say(f"  level 2: {s.outcome}: {' | '.join(s.errors)[:300]}")
        return
    row = search.reg.row(h)
    if row is not None and row.status != "validating":
        exp.say(f"  level 2: the module is {row.name} ({h[:12]}) again, already {row.status}: not run again")
        return
    _climb(search, h, s.source, views, attempt=len(s.attempts))


def _climb(search: BilevelSearch, h: str, source: str, views: list, attempt: int) -> None:
    exp, cfg, it = search.exp, search.cfg, search.iteration
    parsed = parse_step(source)[0].detail
    hooks, functions = parsed["hooks"], parsed["functions"]
    try:
        host = make_host(search, source)
    except (HostStartError, SandboxError, OSError) as e:  # the module did not load, or no host could start
        return _refuse(search, h, [Step("contract", False, f"the mechanism host did not start: {e}")], attempt)
    base = search.base.select(views, random.Random(0))  # the strategy's pick, for the dry run only
    li = LadderInput(search.snap(), search.proposer, level15.public(search.params, it), it, exp.cfg.max_iterations,
                     base.candidate_id, _preview(search, base), cfg.call_timeout_s)
    step, state = contract_step(host, li, hooks)
    steps = [step]
    if step.ok and state is not None:  # a passed contract step always returns its state
        steps.append(dry_run_step(host, li, hooks, functions, state, step))
    if not steps[-1].ok:
        host.close()
        return _refuse(search, h, steps, attempt)
    _rows(search, h, steps, attempt)
    m = Live(h, parsed["name"], "generated", host, hooks)
    search.reg.live[h] = m
    search.reg.record(m, "state_dict", host.call("state_dict", timeout=cfg.call_timeout_s), iteration=it, cid=None,
                      state=state)  # the replayed state: what a resume restores before its first on_result
    plan = judge.plan(it, cfg.window, cfg.judge_pairs, exp.cfg.seed, h)
    search.trial, search.plan = h, plan
    search.reg.set_status(h, "on_trial", f"passed every ladder step; judged over {cfg.judge_pairs} pair(s) of "
                                         f"{cfg.window}-iteration windows, order {plan['order']}", trial=plan)
    exp.say(f"  level 2: mechanism {m.name} ({h[:12]}) passed the ladder ({steps[-1].reason[:160]}); on trial from "
            f"iteration {it}, windows {plan['order']}")


def _refuse(search: BilevelSearch, h: str, steps: list[Step], attempt: int) -> None:
    _rows(search, h, steps, attempt)
    bad = steps[-1]
    search.reg.set_status(h, "refused", f"{bad.step}: {bad.reason}")
    search.exp.say(f"  level 2: refused at {bad.step}: {bad.reason[:300]}")


def _rows(search: BilevelSearch, h: str, steps: list[Step], attempt: int) -> None:
    for st in steps:
        search.store.insert(MechanismCheck(experiment_id=search.eid, mechanism_hash=h, step=st.step, attempt=attempt,
                                           ok=st.ok, reason=st.reason, detail=st.detail, checked_at=now()))


def _preview(search: BilevelSearch, parent: Any) -> Any:
    """guidance text -> the opening prompt the proposer would send with it (None: it takes no text)."""
    opening = getattr(search.exp.proposer, "opening", None)
    if not search.proposer["takes_guidance"] or opening is None:
        return None
    from metaopt.meta_agent.proposers import Evidence

    return lambda text: opening(parent.harness, Evidence(search.store, ["-"], search.eid, guidance=text))
