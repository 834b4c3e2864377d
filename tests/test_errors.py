"""Errors and names: every exception class lives in core/errors.py and says who it is for; every
user-facing name goes through a Registry, and an unknown one is one line listing the known ones,
exit 2 (through the CLI, before any container)."""

from __future__ import annotations

import ast
import builtins
import inspect
import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from pydantic import ValidationError

import metaopt
from metaopt.core import errors
from metaopt.core.errors import MetaoptError, SystemicError, TaskFailure, ToolError, UnknownName, UserError

PACKAGE = Path(metaopt.__file__).parent
AUDIENCES = {"For the user:": UserError, "For the model:": ToolError, "For the task:": TaskFailure,
             "For the system:": SystemicError}


def _imports_metaopt(tree: ast.Module) -> bool:
    """Files that never import metaopt stand alone (copied into sandboxes, task samples): they
    keep their own exceptions."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "metaopt" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "metaopt":
            return True
    return False


def _exception_classes_outside_errors() -> set[str]:
    ours = {n for n, c in vars(errors).items() if inspect.isclass(c) and issubclass(c, BaseException)}
    builtin = {n for n in dir(builtins) if n.endswith(("Error", "Exception"))} | {"Exception", "BaseException"}
    found = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "core/errors.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if not _imports_metaopt(tree):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                         if isinstance(b, (ast.Name, ast.Attribute))}
                if bases & (ours | builtin):
                    found.add(f"{rel}:{node.name}")
    return found


def test_every_exception_class_is_declared_in_core_errors():
    found = _exception_classes_outside_errors()
    assert found == set(), "declare these in metaopt/core/errors.py"


def test_every_error_says_who_it_is_for_and_is_that_kind():
    classes = [c for c in vars(errors).values()
               if inspect.isclass(c) and issubclass(c, MetaoptError) and c.__module__ == errors.__name__]
    assert len(classes) > 20
    for cls in classes:
        if cls is MetaoptError:
            continue
        doc = cls.__doc__ or ""
        who = [prefix for prefix in AUDIENCES if doc.startswith(prefix)]
        assert who, f"{cls.__name__}: the docstring must start with one of {list(AUDIENCES)}"
        assert issubclass(cls, AUDIENCES[who[0]]), f"{cls.__name__} says {who[0]!r} but is no {AUDIENCES[who[0]].__name__}"


def test_not_found_is_a_user_error_and_a_key_error_with_a_plain_message():
    e = errors.NotFound("no trial 'x'")
    assert isinstance(e, UserError) and isinstance(e, KeyError) and str(e) == "no trial 'x'"


def test_user_facing_registries_have_a_plugin_group_and_name_their_option():
    from metaopt.evaluation.agents import AGENTS
    from metaopt.evaluation.executor import EXECUTORS
    from metaopt.export import FORMATS
    from metaopt.meta_agent.search.mechanisms import MECHANISMS
    from metaopt.meta_agent.search.strategies import STRATEGIES

    for reg, group, field in ((AGENTS, "metaopt.agents", "--agent"), (EXECUTORS, "metaopt.executors", "--executor"),
                              (FORMATS, "metaopt.export_formats", "--format"),
                              (MECHANISMS, "metaopt.mechanisms", None), (STRATEGIES, "metaopt.strategies", "--strategy")):
        assert reg.group == group
        with pytest.raises(UnknownName) as e:
            reg.load("no-such-name")
        assert e.value.field == field and e.value.known == list(reg) == reg.names()
        for name in reg:
            reg.load(name)  # every built-in target imports


def test_a_plugin_mechanism_is_usable_like_a_builtin(monkeypatch):
    from metaopt.meta_agent.search.bilevel.config import BilevelConfig
    from metaopt.meta_agent.search.bilevel.host import BuiltinHost
    from metaopt.meta_agent.search.mechanisms import builtin_source

    plugin = EntryPoint("tabu2", "metaopt.meta_agent.search.mechanisms.tabu:Mechanism", "metaopt.mechanisms")
    monkeypatch.setattr("metaopt.core.registry.entry_points", lambda group: [plugin] if group == plugin.group else [])
    assert BilevelConfig(builtins=["tabu2"]).builtins == ["tabu2"]
    assert builtin_source("tabu2") == builtin_source("tabu") == (PACKAGE / "meta_agent/search/mechanisms/tabu.py").read_text()
    assert BuiltinHost("tabu2").info["name"] == "tabu"
    with pytest.raises(ValidationError, match=r"unknown mechanism 'nope' \(known: tabu, bandit, explore, tabu2\)"):
        BilevelConfig(builtins=["nope"])


RUN = ["run", "--benchmark", "terminalbench-sample", "--model", "fake/solution"]
EVAL = ["eval", "--benchmark", "terminalbench-sample"]
CASES = [
    (EVAL + ["--agent", "genius"], "--agent: unknown agent 'genius' (known: oracle, cheat, nop)"),
    (EVAL + ["--executor", "spark"], "--executor: unknown executor 'spark' (known: local, ray)"),
    (["export", "baseline", "--format", "docx", "--out", "x"],
     "--format: unknown format 'docx' (known: harness, python, inspect, openai-agents, claude-agent-sdk, harbor)"),
    (RUN + ["--strategy", "annealing"], "--strategy: unknown strategy 'annealing' (known: greedy, pareto, bilevel)"),
    (RUN + ["--meta-model", "bogus/x"], ("--meta-model: unknown model provider in 'bogus/x'; known providers: "
                                         "anthropic, fake, local, openai, openai-compatible (names are provider/model)")),
    (RUN + ["--strategy", "bilevel", "--bilevel-set", "builtins=[tabu, genius]"],
     "--bilevel-set: builtins: unknown mechanism 'genius' (known: tabu, bandit, explore)"),
    (RUN + ["--strategy", "bilevel", "--bilevel-set", "base=bilevel"],
     "--bilevel-set: base: unknown base strategy 'bilevel' (known: greedy, pareto)"),
]


@pytest.mark.parametrize("args, line", CASES, ids=[" ".join(a[-2:]) for a, _ in CASES])
def test_an_unknown_name_is_one_line_listing_the_known_ones_exit_2(args, line, tmp_path):
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}  # fails before any container
    r = subprocess.run([sys.executable, "-m", "metaopt", *args], cwd=tmp_path, env=env, capture_output=True,
                       text=True, check=False, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [f"error: {line}"]
    assert not (tmp_path / "x").exists() and not (tmp_path / ".metaopt").exists()
