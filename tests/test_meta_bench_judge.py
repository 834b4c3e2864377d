"""meta-bench, issue 45: any correct fix is judged (a task replay cannot judge runs for real under
the proposal), the world keys a command by how it ran (session, user), the recorder records a case
end to end, the sealed split, suggested edits on and off, neutral names and no machine paths in
the cases. The Docker tests run the real task agent (replay model) in real containers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from metaopt.meta_agent.proposers.llm_tools import Session
from metaopt.meta_bench.bench import briefed, run_bench
from metaopt.meta_bench.case import CASES_DIR, Case, apply_edits, load_cases
from metaopt.meta_bench.check import judge
from metaopt.meta_bench.live import Live
from metaopt.meta_bench.record import prepare, record
from metaopt.meta_bench.world import World
from metaopt.traces.store import Store

ROOT = Path(__file__).parents[1]
TEMPLATE = CASES_DIR / "quoted-template"  # bash's template quotes the whole command: the shell finds no such program
SCRIPT = """
- tool: set_tool
  arguments: {name: bash, template: "%s"}
- tool: write_revision
  arguments: {rationale: "from the traces", cause: "the bash template", fixes: [greet, slow-index], keeps: []}
"""


def _template(case: Case, template: str):
    return apply_edits(case.harness(), [{"set_tool": {"name": "bash", "template": template}}])


def test_without_docker_a_fix_replay_cannot_judge_is_unjudged_never_collateral():
    case = Case(TEMPLATE)
    ref = judge(case, case.fixed_harness())  # the reference fix: every command was recorded
    assert ref.fixed and ref.live == [] and ref.unjudged == []
    other = judge(case, _template(case, "bash -c {command}"))  # correct, but renders commands no run issued
    assert (other.fixed, other.unjudged, other.broken, other.live) == (False, ["greet", "slow-index"], [], [])
    assert all(r.unseen for r in other.replays)


def test_a_case_fixed_two_ways_scores_fixed_both_ways_and_a_wrong_fix_does_not(docker_backend, tmp_path):
    """quoted-template's reference fix inserts the command raw; `bash -c {command}` is another
    correct fix (no recording has its commands: they run for real); `echo {command}` renders
    commands that succeed and do nothing: its real verifier fails it."""
    store = Store(tmp_path / "s.duckdb")
    live, rows = Live(docker_backend), {}
    for label, template in (("reference", "{command!raw}"), ("other", "bash -c {command}"), ("wrong", "echo {command}")):
        script = tmp_path / f"{label}.yaml"
        script.write_text(SCRIPT % template)
        [rows[label]] = run_bench([Case(TEMPLATE)], f"fake/script:{script}", store, live=live).rows
    assert (rows["reference"].fixed, rows["reference"].live) == (True, [])
    assert (rows["other"].fixed, rows["other"].live, rows["other"].unjudged) == (True, ["greet", "slow-index"], [])
    assert (rows["wrong"].fixed, rows["wrong"].live) == (False, ["greet", "slow-index"])
    saved = store.rows("SELECT case_name, fixed, live FROM meta_bench_results ORDER BY finished_at")
    assert [(r["fixed"], json.loads(r["live"])) for r in saved] == [(True, []), (True, ["greet", "slow-index"]),
                                                                   (False, ["greet", "slow-index"])]
    store.close()


def test_the_recorder_records_a_case_end_to_end_and_the_world_knows_how_a_tool_ran(docker_backend, tmp_path):
    """A defect in how a tool runs with the same command text: bash as a fresh exec by `nobody`,
    who cannot write under /app. Recorded for real (python -m metaopt.meta_bench.record's record),
    then judged: the defect and the reference fix (persistent shell) by replay, another correct fix
    (a fresh exec as root) for real."""
    shutil.copytree(ROOT / "metaopt/meta_bench/tasks/terminal/greet", tmp_path / "tasks/greet")
    folder = tmp_path / "cases" / "bash-runs-as-nobody"
    folder.mkdir(parents=True)
    (folder / "manifest.yaml").write_text(yaml.safe_dump({
        "schema_version": 1, "split": "heldout", "category": "tool_user", "cause": "bash runs as nobody in a fresh exec",
        "cause_pattern": "nobody|user", "dataset": "../../tasks", "defect": [
            {"set_tool": {"name": "bash", "session": "fresh", "user": "nobody"}}],
        "fix": [{"set_tool": {"name": "bash", "session": "persistent"}}], "affected": ["greet"], "keeps": [],
        "tasks": {"greet": {"steps": [{"id": "write", "run": "mkdir -p /app/out && echo 'hello, world' > /app/out/hello.txt",
                                       "sets": {"hello": "ok"}}], "pass_if": {"hello": "ok"}}}}))
    case = prepare(folder)
    assert record(case, docker_backend) == []
    world = World.load(folder / "world.jsonl")
    ran = {(e.session, e.user, e.exit_code) for e in world.entries["greet"]}
    assert ("fresh", "nobody", 1) in ran and ("persistent", None, 0) in ran  # one command text, two ways, two results
    text = "".join(p.read_text() for p in folder.rglob("*") if p.is_file())
    assert str(tmp_path) not in text and "bash-runs-as-nobody" not in text  # no machine path, no case name
    assert not judge(case, case.harness()).fixed
    assert (j := judge(case, case.fixed_harness())).fixed and j.live == []
    other = apply_edits(case.harness(), [{"set_tool": {"name": "bash", "user": "root"}}])  # still fresh, as root
    assert judge(case, other).unjudged == ["greet"]
    assert (j := judge(case, other, Live(docker_backend))).fixed and j.live == ["greet"]


# -- splits, suggested edits, names, paths (no Docker) ----------------------------------------------
HOST_PATHS = re.compile(r"/(?:work|home|Users)/|/tmp/(?:tmp|pytest-)|/private/var/|/root/\.cache|" + re.escape(str(ROOT)))


def test_no_case_file_holds_a_machine_path():
    """Recorded traces name the replay model's manifest as <case>/manifest.yaml; nothing else of
    the recording machine (its checkout, home, temp folders) is stored."""
    bad = []
    for path in CASES_DIR.rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".yaml", ".md"):
            text = path.read_text(errors="replace")
            bad += [f"{path.relative_to(CASES_DIR)}: {m.group(0)}" for m in HOST_PATHS.finditer(text)][:1]
            bad += [f"{path.relative_to(CASES_DIR)}: replay:{m.group(1)}"
                    for m in re.finditer(r"replay:([^\"\\]{0,80})", text) if not m.group(1).startswith("<case>/")][:1]
    assert bad == []


def test_the_meta_agent_sees_a_neutral_harness_name_never_the_case_folder():
    for case in load_cases():
        store = Store(":memory:")
        parent, ev = briefed(case, store)
        session = Session(parent, ev, set())
        seen = session.briefing() + session.read_harness() + "".join(
            str(r) for r in store.rows("SELECT * FROM spans") + store.rows("SELECT * FROM trials"))
        assert parent.name == case.neutral_name and case.name not in seen, case.name
        store.close()


def test_suggested_edits_can_be_switched_off():
    case = Case(CASES_DIR / "timeout-build")
    on, off = Store(":memory:"), Store(":memory:")
    assert "Edits the signals point at" in Session(*briefed(case, on), set()).briefing()
    assert "Edits the signals point at" not in Session(*briefed(case, off, suggestions=False), set()).briefing()
    [row] = run_bench([case], "oracle", on, suggestions=False).rows
    assert row.fixed and row.suggestions is False and row.split == "dev"


def _cli(*args: str, db: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metaopt", "bench", *args, "--db", str(db)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(db.parent)})


def test_every_figure_is_given_on_each_split_and_split_selects_the_cases(tmp_path):
    cases = tmp_path / "cases"
    for name, split in (("timeout-build", "dev"), ("truncated-log", "heldout")):
        shutil.copytree(CASES_DIR / name, cases / name)
        m = cases / name / "manifest.yaml"
        m.write_text(m.read_text().replace("split: dev", f"split: {split}"))
    db = tmp_path / "s.duckdb"
    r = _cli("meta", "--meta-model", "oracle", "--cases", str(cases), "--json", db=db)
    data = json.loads(r.stdout)
    assert [(c["case_name"], c["split"]) for c in data["cases"]] == [("timeout-build", "dev"), ("truncated-log", "heldout")]
    assert (data["by_split"]["dev"]["fixed"], data["by_split"]["heldout"]["fixed"], data["totals"]["fixed"]) == (1, 1, 2)
    only = json.loads(_cli("meta", "--meta-model", "placebo", "--cases", str(cases), "--split", "heldout", "--json",
                           db=tmp_path / "h.duckdb").stdout)
    assert list(only["by_split"]) == ["heldout"]  # no empty entry for a split not run
    r = _cli("meta", "--meta-model", "placebo", "--cases", str(cases), "--split", "heldout", db=db)
    assert r.returncode == 0 and "truncated-log" in r.stdout and "timeout-build" not in r.stdout
    assert "heldout: fixed 0/1" in r.stdout
    r = _cli("list", db=db)
    assert [line.split()[1:6] for line in r.stdout.splitlines()] == [["placebo", "fixed", "0/1", "heldout", "0/1"],
                                                                    ["oracle", "fixed", "2/2", "heldout", "1/1"]]
    for bad in (("--split", "test"), ("--live", "maybe")):
        r = _cli("meta", "--meta-model", "oracle", "--cases", str(cases), *bad, db=db)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and bad[1] in r.stderr
    assert load_cases(cases, "heldout")[0].manifest.split == "heldout"


def test_a_two_defect_case_s_middle_state_is_judged(docker_backend):
    """turns-and-convention with only its turn limit raised: the agent now gets to write the report,
    a command no recording ran; replay cannot judge it, the real run can (still no header row)."""
    case = Case(CASES_DIR / "turns-and-convention")
    half = apply_edits(case.harness(), case.manifest.fix[:1])
    assert judge(case, half).unjudged == ["region-report"]
    j = judge(case, half, Live(docker_backend))
    assert (j.fixed, j.still_failing, j.live, j.unjudged, j.broken) == (False, ["region-report"], ["region-report"], [], [])
    assert judge(case, case.fixed_harness(), Live(docker_backend)).fixed
