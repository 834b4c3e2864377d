"""The validation ladder refuses what it should, step by step, and the mechanism host enforces the
rules again at run time; the built-in mechanisms pass the same ladder (the protocol's
conformance suite)."""

from __future__ import annotations

import pytest
from _bilevel_helpers import PROMPT_TABU, recorded

from metaopt.meta_agent.search.bilevel.host import DockerHost, HostStartError, ProcessHost
from metaopt.meta_agent.search.bilevel.ladder import LadderInput, contract_step, dry_run_step
from metaopt.meta_agent.search.bilevel.static import imports_step, parse_step
from metaopt.meta_agent.search.mechanisms import BUILTINS, builtin_source

LLM = {"name": "llm", "takes_guidance": True, "areas": ["prompts", "tools", "routing", "limits"]}
HEURISTIC = {"name": "heuristic", "takes_guidance": False, "areas": ["limits"]}
SEARCH = {"favour": [], "freeze": [], "explore_rate": 0.0}


def prompt_of(text: str) -> str:
    return "The parent harness failed ...\n\n## Search guidance\n" + text


def ladder(source: str, proposer=LLM, timeout: float = 2.0, iteration: int = 5) -> list:
    """Every step the source climbs, up to the first refusal (as generate.py climbs it)."""
    step, tree = parse_step(source)
    if tree is None:
        return [step]
    steps = [step, imports_step(tree)]
    if not steps[-1].ok:
        return steps
    li = LadderInput(recorded(), proposer, SEARCH, iteration, 10, "e/c3", prompt_of if proposer["takes_guidance"] else None,
                     timeout)
    try:
        host = ProcessHost(source)
    except HostStartError as e:
        return steps + [type(step)("contract", False, str(e))]
    with host:
        c, state = contract_step(host, li, step.detail["hooks"])
        steps.append(c)
        if c.ok:
            steps.append(dry_run_step(host, li, step.detail["hooks"], step.detail["functions"], state, c))
    return steps


def refused_at(source: str, **kw) -> tuple[str, str]:
    steps = ladder(source, **kw)
    bad = next((s for s in steps if not s.ok), None)
    assert bad is not None, f"climbed every step: {[s.reason for s in steps]}"
    return bad.step, bad.reason


def mech(body: str, name: str = "probe") -> str:
    """A mechanism whose hooks are fine, with `body` replacing/adding methods."""
    base = {
        "on_result": "    def on_result(self, candidate, decision, ctx):\n        self.n += 1\n",
        "guidance": "    def guidance(self, ctx):\n        return 'PROBE: %d results seen' % self.n\n",
        "state_dict": "    def state_dict(self):\n        return {'n': self.n}\n",
        "load_state_dict": "    def load_state_dict(self, state):\n        self.n = int(state['n'])\n",
    }
    for line in body.splitlines():
        if line.startswith("    def "):
            base.pop(line.split("def ")[1].split("(")[0], None)
    return (f"class Mechanism:\n    name = '{name}'\n\n    def __init__(self):\n        self.n = 0\n\n"
            + "\n".join(base.values()) + "\n" + body)


def test_a_valid_generated_mechanism_climbs_every_step():
    steps = ladder(PROMPT_TABU)
    assert [(s.step, s.ok) for s in steps] == [("parse", True), ("imports", True), ("contract", True),
                                               ("dry_run", True)], [s.reason for s in steps]
    assert steps[2].detail["calls"]["on_result"] >= 4  # every recorded candidate after the baseline (+ edge case)
    assert "filter would drop" in steps[3].reason and "guidance reached" in steps[3].reason


@pytest.mark.parametrize("name", BUILTINS)
def test_the_built_in_mechanisms_pass_the_same_ladder(name):
    # at iteration 7 each has something to say: tabu (c4's tools.grep), bandit, explore (its period)
    steps = ladder(builtin_source(name), iteration=7)
    assert [s.ok for s in steps] == [True] * 4, [s.reason for s in steps]


def test_a_syntax_error_is_refused_at_parse_with_its_line():
    step, why = refused_at(mech("    def guidance(self, ctx)\n        return None\n"))
    assert step == "parse" and "syntax error at line" in why


@pytest.mark.parametrize("source, expect", [
    ("x = 1\n", "exactly one top-level class named Mechanism"),
    (mech("").replace("    def state_dict(self):\n        return {'n': self.n}\n", ""), "has no state_dict()"),
    (mech("    def filter(self, revision):\n        return True\n"), "filter() must take self and exactly 2"),
    (mech("").replace("name = 'probe'", "name = 'Bad Name'"), "Mechanism.name must be a string literal"),
])
def test_a_module_without_the_protocols_shape_is_refused_at_parse(source, expect):
    step, why = refused_at(source)
    assert step == "parse" and expect in why


@pytest.mark.parametrize("line, expect", [
    ("import os", "import os is not allowed"),
    ("import subprocess", "import subprocess is not allowed"),
    ("from socket import socket", "from socket import"),
    ("import importlib", "import importlib is not allowed"),
    ("X = open('/etc/passwd')", "open is not allowed"),
    ("X = eval('1')", "eval is not allowed"),
    ("X = getattr(1, 'real')", "getattr is not allowed"),
    ("X = ().__class__.__bases__", "attribute __class__ is not allowed"),
    ("import random\nX = random._os", "private attribute _os"),
    ("G = (x for x in [1])\nF = G.gi_frame", "gi_frame (frame/code introspection)"),
])
def test_a_forbidden_import_or_name_is_refused_at_imports(line, expect):
    step, why = refused_at(line + "\n" + mech(""))
    assert step == "imports" and expect in why


def test_the_host_enforces_the_rules_at_run_time_even_without_the_static_checks():
    # Straight into the host, as if the static steps had been fooled: I/O is refused at run time.
    with pytest.raises(HostStartError, match="import of 'os' is not allowed"):
        ProcessHost(mech("") + "import os\n")
    src = mech("    def guidance(self, ctx):\n"
               "        which = ctx['which']\n"
               "        if which == 'open':\n            return open('/etc/hostname').read()\n"
               "        if which == 'os':\n            import random\n            return str(random._os.listdir('/'))\n"
               "        if which == 'memory':\n            return 'x' * (2 ** 31)\n"
               "        return None\n")
    with ProcessHost(src) as host:
        assert "NameError" in host.call("guidance", {"which": "open"}).error
        r = host.call("guidance", {"which": "os"})
        assert r.status == "raised" and "PermissionError" in r.error and "os.listdir" in r.error
        assert "MemoryError" in host.call("guidance", {"which": "memory"}).error
        assert host.call("guidance", {"which": "none"}).ok  # the host survives all of that
    with ProcessHost(mech("    def guidance(self, ctx):\n        print('debugging', ctx)\n        return 'ok'\n")) as host:
        assert host.call("guidance", {"a": 1}).value == "ok"  # a print does not break the JSON protocol
        assert "own network namespace" in host.isolation and "user nobody" in host.isolation


def test_a_hook_that_raises_on_recorded_data_is_refused_at_contract():
    # val_mean is None for a candidate that was never validated (e/c1, rejected at the screen)
    step, why = refused_at(mech("    def on_result(self, candidate, decision, ctx):\n"
                                "        self.n += candidate['val_mean'] > 0.5\n"))
    assert step == "contract" and "on_result() on recorded candidate e/c1: raised: TypeError" in why
    step, why = refused_at(mech("    def on_result(self, candidate, decision, ctx):\n"
                                "        self.n += len(candidate['kinds'][0])\n"))
    assert step == "contract" and "on an edge case" in why and "IndexError" in why


def test_an_infinite_loop_is_refused_at_contract_by_the_call_timeout():
    step, why = refused_at(mech("    def on_result(self, candidate, decision, ctx):\n"
                                "        while candidate['status'] == 'rejected':\n            pass\n"), timeout=1.0)
    assert step == "contract" and "did not return within 1 s" in why and "timeout" in why


def test_garbage_output_is_refused_at_contract():
    step, why = refused_at(mech("    def guidance(self, ctx):\n        return {'text': 'not a string'}\n"))
    assert step == "contract" and "guidance must return a string or None" in why


def test_state_that_does_not_round_trip_is_refused_at_contract():
    step, why = refused_at(mech("    def load_state_dict(self, state):\n        self.n = 0\n"))
    assert step == "contract" and "state does not round-trip" in why


def test_a_helper_nothing_calls_is_refused_at_dry_run():
    src = mech("") + "\n\nclass TabuList:\n    def __init__(self):\n        self.items = []\n\n" \
                     "    def add(self, kind):\n        self.items.append(kind)\n"
    step, why = refused_at(src)
    assert step == "dry_run" and "dead code" in why and "TabuList.__init__" in why and "TabuList.add" in why


def test_a_mechanism_whose_outputs_reach_nothing_is_refused_at_dry_run():
    step, why = refused_at(mech("    def guidance(self, ctx):\n        return None\n"))
    assert step == "dry_run" and "no hook output reached the proposer or changed a selection" in why
    # guidance is an effect only for a proposer that reads text
    step, why = refused_at(mech(""), proposer=HEURISTIC)
    assert step == "dry_run" and "the heuristic proposer takes no text" in why


def test_a_select_parent_that_changes_the_pick_is_an_effect():
    src = mech("    def guidance(self, ctx):\n        return None\n\n"
               "    def select_parent(self, candidates, rng):\n"
               "        others = [c['id'] for c in candidates if not c['default']]\n"
               "        return rng.choice(others) if others else None\n")
    steps = ladder(src, proposer=HEURISTIC)
    assert steps[-1].ok and "select_parent picked e/c0 over the strategy's e/c3" in steps[-1].reason


@pytest.fixture(scope="module")
def docker_backend():
    try:
        from metaopt.sandbox.docker import DockerBackend

        b = DockerBackend()
        b.resolve_image("metaopt-base:latest")
    except Exception as e:  # noqa: BLE001 - no daemon or no base image here
        pytest.skip(f"docker: {e}")
    yield b
    b.prune("test-mechanism-host")


def test_the_contract_runs_in_a_docker_sandbox_without_network(docker_backend):
    li = LadderInput(recorded(), LLM, SEARCH, 5, 10, "e/c3", prompt_of)
    step, _ = parse_step(PROMPT_TABU)
    with DockerHost(PROMPT_TABU, docker_backend, "test-mechanism-host") as host:
        c, state = contract_step(host, li, step.detail["hooks"])
        d = dry_run_step(host, li, step.detail["hooks"], step.detail["functions"], state, c)
        assert c.ok and d.ok, (c.reason, d.reason)
        assert "no network" in c.detail["isolation"]
    with DockerHost(mech("    def guidance(self, ctx):\n        while True:\n            pass\n"), docker_backend,
                    "test-mechanism-host") as host:
        r = host.call("guidance", {}, timeout=1.0)
        assert r.status == "timeout" and host.call("guidance", {}).status == "dead"
    assert not docker_backend.client.containers.list(filters={"label": "metaopt.run_id=test-mechanism-host"})


def test_a_live_timeout_switches_the_mechanism_off_and_points_the_active_set_back(tmp_path):
    from metaopt.meta_agent.search.bilevel.live import Live, Registry
    from metaopt.meta_agent.search.bilevel.records import ActiveSet, HookCall, MechanismRow
    from metaopt.traces.store import Store, now

    src = mech("    def guidance(self, ctx):\n        while ctx['iteration'] > 3:\n            pass\n        return 'ok'\n")
    said: list[str] = []
    with Store(tmp_path / "s.duckdb") as store:
        reg = Registry(store, "e", said.append)
        reg.sync(0, [], "before it")
        store.insert(MechanismRow(experiment_id="e", mechanism_hash="h1", name="probe", origin="generated", source=src,
                                  status="on_trial", created_at=now(), updated_at=now()))
        host = ProcessHost(src)
        m = reg.live["h1"] = Live("h1", "probe", "generated", host, ["guidance"])
        reg.sync(3, ["h1"], "probe on trial")
        reg.record(m, "guidance", host.call("guidance", {"iteration": 3}, timeout=1.0), iteration=3, cid="e/c3")
        reg.record(m, "guidance", host.call("guidance", {"iteration": 4}, timeout=1.0), iteration=4, cid="e/c4")
        calls = store.select(HookCall, "true", order="called_at")
        row = store.select(MechanismRow, "true")[0]
        sets = store.select(ActiveSet, "true", order="changed_at")
    assert [c.status for c in calls] == ["ok", "timeout"] and "did not return within 1 s" in calls[1].error
    assert row.status == "off" and "guidance() timeout at iteration 4" in row.status_reason
    assert "h1" not in reg.live and host.dead and sets[-1].hashes == []
    assert "back to the set of iteration 0" in sets[-1].reason and any("switched off" in s for s in said)
