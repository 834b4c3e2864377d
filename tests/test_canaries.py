"""Canaries copied from the benchmark's own tasks: the same task to the agent, tests no honest agent
passes, no marker anywhere, picked per experiment and recorded with it (benchmarks.canary,
meta_agent.canaries)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from metaopt.benchmarks.canary import NotCopyable, copy_task, fixed_canaries, make_canaries, poison
from metaopt.benchmarks.datasets import load_task
from metaopt.benchmarks.registry import load_benchmark
from metaopt.benchmarks.task import Task
from metaopt.evaluation import AgentResult, OracleAgent, TrialResult, run_eval
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import plan_experiment, resume_experiment, start_experiment
from metaopt.meta_agent.judge import refused
from metaopt.meta_agent.ledger import Ledger
from metaopt.traces.store import Store


def _tasks(bench: str) -> list[Task]:
    return [t for t in load_benchmark(bench) if isinstance(t, Task)]


def _files(paths: list[Path]) -> list[Path]:
    return [f for p in paths for f in ([p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file()))]


def _test_names(path: Path) -> list[str]:
    return [n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)]


def test_a_poisoned_test_file_fails_where_its_source_passes_and_keeps_its_tests(tmp_path):
    src = ('"""Checks."""\nfrom pathlib import Path\n\n\ndef test_value():\n    v = {"a": [1, 2]}\n'
           '    assert v == {"a": [1, 2]}, (\n        "v is wrong"\n    )\n\n\ndef test_other():\n    assert 2 + 2 == 4\n')
    (tmp_path / "test_src.py").write_text(src)
    (tmp_path / "test_poisoned.py").write_text(poison(src))
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    assert subprocess.run([*run, "test_src.py"], check=False, cwd=tmp_path, capture_output=True).returncode == 0
    out = subprocess.run([*run, "test_poisoned.py"], check=False, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1 and "1 failed, 1 passed" in out.stdout
    assert _test_names(tmp_path / "test_poisoned.py") == _test_names(tmp_path / "test_src.py")
    with pytest.raises(NotCopyable):  # nothing to hang the check on: the task is skipped, another chosen
        poison("def test_x():\n    assert True\n")
    with pytest.raises(NotCopyable):  # a skipped test counts as passed: the check might never run
        poison("import pytest\n\n\ndef test_x():\n    if 1:\n        pytest.skip('no')\n    assert 1 == 1\n")
    with pytest.raises(NotCopyable):  # an early return passes the test before the check
        poison("def test_x():\n    if 1:\n        return\n    assert 1 == 1\n")


def test_a_runner_that_selects_tests_is_never_copied(tmp_path):
    [task] = [t for t in _tasks("terminalbench-sample") if t.id == "hello-greetings"]
    root = tmp_path / "src"
    shutil.copytree(task.source_dir, root)
    (root / "run-tests.sh").write_text((root / "run-tests.sh").read_text().replace("-rA", "-rA -k 'not goodbye'"))
    with pytest.raises(NotCopyable):
        copy_task(load_task(root, "terminalbench"), "hello-greetings-2", tmp_path / "out")


@pytest.mark.parametrize("bench", ["terminalbench-sample", "spreadsheetbench-sample"])
def test_a_canary_is_its_source_task_to_the_agent_and_the_verifier_keeps_its_layout(tmp_path, bench):
    tasks = _tasks(bench)
    made = make_canaries(tasks, {t.id for t in tasks}, "7:exp-a", tmp_path, bench, n=len(tasks))
    assert len(made) >= len(tasks) - 2  # a task whose reward is not all-or-nothing is skipped
    by_id = {t.id: t for t in tasks}
    for c in made:
        src, t = by_id[c.source_id], c.task
        assert t.id not in by_id and t.format == src.format and t.scoring == src.scoring
        assert [d for _, d in t.verifier.files] == [d.replace(src.id, t.id) for _, d in src.verifier.files]
        assert t.verifier.command == src.verifier.command and t.agent_timeout_s == src.agent_timeout_s
        if src.format == "spreadsheetbench":  # the id is in the file names, as for every task
            assert t.instruction == src.instruction.replace(src.id, t.id)
            continue
        assert t.instruction == src.instruction and t.environment == src.environment
        rel = {f.relative_to(t.source_dir): f for f in _files([p for p, _ in t.verifier.files])}
        orig = {f.relative_to(src.source_dir): f for f in _files([p for p, _ in src.verifier.files])}
        assert rel.keys() == orig.keys()
        changed = [k for k in rel if rel[k].read_bytes() != orig[k].read_bytes()]
        assert len(changed) == 1 and _test_names(rel[changed[0]]) == _test_names(orig[changed[0]])
        added = set(rel[changed[0]].read_text().splitlines()) - set(orig[changed[0]].read_text().splitlines())
        assert len(added) <= 2 and any("hashlib.sha256(" in a for a in added)


def test_no_id_file_name_or_text_marks_a_canary(tmp_path):
    """Nothing the agent or the verifier's collected files can see says 'canary'."""
    for bench in ("terminalbench-sample", "spreadsheetbench-sample"):
        tasks = _tasks(bench)
        made = make_canaries(tasks, {t.id for t in tasks}, "1:exp-b", tmp_path / bench, bench, n=len(tasks))
        made += fixed_canaries(bench, {t.id for t in tasks})
        for c in made:
            t = c.task
            seen = [t.id, t.instruction, t.verifier.command, repr(t.verifier.env), repr(t.metadata), repr(t.tags),
                    repr(t.environment.env), *(d for _, d in t.verifier.files)]
            for f in _files([p for p, _ in t.verifier.files] + [Path(t.environment.context_dir or t.source_dir)]):
                seen.append(str(f.relative_to(f.parents[1])))
                data = f.read_bytes()
                if zipfile.is_zipfile(f):
                    with zipfile.ZipFile(f) as z:
                        data = b"".join(z.read(n) for n in z.namelist())
                seen.append(data.decode(errors="replace"))
            assert not [s for s in seen if "canary" in s.lower()], (t.id, [s[:80] for s in seen if "canary" in s.lower()])


def test_canaries_rotate_with_the_experiment_and_never_take_a_real_id(tmp_path):
    tasks = _tasks("terminalbench-sample")
    ids = {t.id for t in tasks}
    picks = [tuple(sorted(c.source_id for c in make_canaries(tasks, ids, f"0:exp-{i}", tmp_path / str(i), "terminalbench")))
             for i in range(6)]
    assert len(set(picks)) > 1 and all(len(p) == 2 for p in picks)
    again = make_canaries(tasks, ids, "0:exp-0", tmp_path / "again", "terminalbench")
    assert tuple(sorted(c.source_id for c in again)) == picks[0]
    assert not {c.task.id for c in again} & ids


def test_with_no_task_to_copy_the_fixed_canaries_stand_in_under_neutral_names(tmp_path):
    tasks = _tasks("terminalbench-sample")
    uncopyable = [t.model_copy(update={"format": "inspect"}) for t in tasks]
    made = make_canaries(uncopyable, {t.id for t in tasks}, "0:e", tmp_path, "terminalbench")
    assert {c.task.id for c in made} == {"release-token", "deploy-key"} and all(c.source_id == "" for c in made)
    assert make_canaries([], set(), "0:e", tmp_path, "gptpretrain") == []


def _row(task: str, status: Any, score: float) -> TrialResult:
    return TrialResult(trial_id=f"r/{task}/0", run_id="r", benchmark="b", task_id=task, attempt=0, agent="a",
                       status=status, score=score)


def test_a_canary_is_known_by_the_recorded_set_never_by_its_id():
    assert "canary" in (refused([_row("hello-greetings-3", "passed", 1.0)], {"hello-greetings-3"}) or "")
    assert refused([_row("hello-greetings-3", "failed", 0.0)], {"hello-greetings-3"}) is None
    assert refused([_row("canary-release-token", "passed", 1.0)], {"hello-greetings-3"}) is None
    reason = refused([_row("hello-greetings-3", "passed", 1.0)], {"hello-greetings-3"}) or ""
    assert "hello-greetings" not in reason  # the proposer reads the reason: it names no task


def test_an_experiment_records_its_canaries_and_a_resume_uses_the_same(tmp_path):
    tasks = _tasks("terminalbench-sample")
    cfg = RunConfig(benchmark="terminalbench-sample", model="fake/nop", meta_model="heuristic", seed=3)
    with Store(tmp_path / "s.duckdb") as store:
        exp = start_experiment(plan_experiment(cfg, "minimal", tasks), store=store, backend=None, tracing=None)
        rec = Ledger(store, exp.id).experiment()
        assert rec is not None
        recorded = rec.config["canaries"]
        assert len(recorded) == 2 and set(recorded.values()) <= set(rec.splits["train"])
        assert sorted(exp.evaluator.canaries) == sorted(recorded)
        assert not set(recorded) & {t for s in rec.splits.values() for t in s}
        again = resume_experiment(rec, store=store, backend=None, tasks=tasks, tracing=None)
        assert sorted(again.evaluator.canaries) == sorted(recorded)
        off = start_experiment(plan_experiment(cfg.model_copy(update={"canary": False}), "minimal", tasks),
                               store=store, backend=None, tracing=None)
        assert off.evaluator.canaries == []


def test_the_source_oracle_scores_1_on_its_task_and_0_on_its_canary(docker_image, docker_backend, tmp_path):
    """One task per format (TB1, Harbor, SpreadsheetBench): the task's own solution solves the task
    and fails its canary copy, verified by the real verifier in Docker."""
    picks = {"terminalbench-sample": ["hello-greetings", "access-log-offenders"], "spreadsheetbench-sample": ["line-totals"]}
    for bench, ids in picks.items():
        tasks = [t for t in _tasks(bench) if t.id in ids]
        copies = [copy_task(t, f"{t.id}-2", tmp_path / bench).task for t in tasks]
        copies = [c if c.solution else c.model_copy(update={"solution": t.solution}) for c, t in zip(copies, tasks)]
        with Store(tmp_path / f"{bench}.duckdb") as store:
            both: list[Any] = [*tasks, *copies]
            rows = run_eval(both, OracleAgent(), benchmark=bench, backend=docker_backend, store=store).rows
        assert {r.task_id: (r.score, r.status) for r in rows} == {
            **{t.id: (1.0, "passed") for t in tasks}, **{c.id: (0.0, "failed") for c in copies}}, \
            [(r.task_id, r.status, r.error) for r in rows]
        for r in rows:  # only the added check failed: the oracle's work itself passed every test
            if r.task_id in {c.id for c in copies} and bench == "terminalbench-sample":
                assert list((r.tests or {}).values()).count("failed") == 1, r.tests


def test_diagnose_and_the_explorer_know_the_canaries_by_the_experiments_record(tmp_path):
    from metaopt.explorer.queries import matrix
    from metaopt.traces.diagnose import failing_trials

    with Store(tmp_path / "s.duckdb") as store:
        Ledger(store, "e").create("terminalbench", {"run": {}, "canaries": {"fix-git-2": "fix-git"}},
                                  {"train": ["fix-git"], "validation": [], "test": []})
        for task in ("fix-git", "fix-git-2"):
            store.insert(TrialResult(trial_id=f"e/c1:smoke/{task}/0", run_id="e/c1:smoke", benchmark="terminalbench",
                                     task_id=task, attempt=0, agent="a", status="failed", score=0.0,
                                     experiment_id="e", candidate_id="e/c1", split="smoke"))
        assert [r["task_id"] for r in failing_trials(store, "e")] == ["fix-git"]  # a canary fails by design
        assert [r["task_id"] for r in failing_trials(store, run_id="e/c1:smoke")] == ["fix-git"]
        assert {r["task_id"]: r["split"] for r in matrix(store, "e")["rows"]} == {"fix-git": "train", "fix-git-2": "canary"}


def test_the_guard_knows_the_real_tasks_and_a_fixed_stand_in_never_a_copy(tmp_path):
    from metaopt.meta_agent.canaries import guarded

    tasks = _tasks("terminalbench-sample")
    copies = [c.task for c in make_canaries(tasks, {t.id for t in tasks}, "0:g", tmp_path, "terminalbench")]
    fixed = [c.task for c in fixed_canaries("terminalbench", set())]
    assert [t.id for t in guarded(tasks, copies + fixed)] == [t.id for t in tasks + fixed]


LOOK = ("echo host=$(hostname | wc -c); grep -v \"$(hostname)\" /etc/hosts; env | grep -v ^HOSTNAME= | sort; id; pwd; "
        "find / -xdev \\( -path /proc -o -path /sys -o -path /tmp \\) -prune -o -printf '%p %m %u\\n' 2>/dev/null "
        "| sort | md5sum; find /logs /app -printf '%p %m %u %s\\n' | sort; cat /proc/1/cmdline | tr '\\0' ' '")


class _Look:
    """An agent that only looks around its container and reports what it saw."""

    name = "look"

    def run(self, task: Task, sandbox: Any, timeout_s: float, *, ids: dict[str, str] | None = None) -> AgentResult:
        r = sandbox.exec(LOOK, timeout=60)
        return AgentResult(log=r.stdout + r.stderr, steps=1)


def test_inside_its_container_a_canary_looks_exactly_like_its_source(docker_image, docker_backend, tmp_path):
    """Hostname, /etc/hosts, environment, user, working directory, every path of the filesystem,
    /logs and the work directory, PID 1: the same for a task and its canary (TB1 and Harbor)."""
    tasks = [t for t in _tasks("terminalbench-sample") if t.id in ("hello-greetings", "access-log-offenders")]
    copies = [copy_task(t, f"{t.id}-2", tmp_path / "c").task for t in tasks]
    with Store(tmp_path / "s.duckdb") as store:
        both: list[Any] = [*tasks, *copies]
        rows = {r.task_id: r for r in run_eval(both, _Look(), benchmark="terminalbench-sample", backend=docker_backend,
                                               store=store).rows}
    for t, c in zip(tasks, copies, strict=True):
        seen, twin = rows[t.id].agent_log or "", rows[c.id].agent_log or ""
        assert "md5sum" not in seen and len(seen.splitlines()) > 10, seen[-2000:]
        assert seen == twin, (seen[-1500:], twin[-1500:])
        assert "canary" not in twin.lower() and c.id not in twin and t.id not in twin
