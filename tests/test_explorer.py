"""The trace explorer in a real headless browser (Debian's chromium driven by Playwright) against
a store filled by real runs: `metaopt run` (minimal harness, fake/solution, a scripted meta-model
whose revision edits the system prompt) and a `metaopt eval` with fake/nop, in real containers.
The server is `metaopt ui --port 0` in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
import yaml
from _attacks import FAMILIES, write_dataset
from _docker_fixtures import metaopt
from _shared_runs import ui_server
from _step_tasks import make_tasks

pytestmark = pytest.mark.usefixtures("docker_image")
PROMPT_LINE = "Check /app/out.txt before you call finish."


def _revision_script(tmp: Path) -> str:
    from metaopt.meta_agent.proposers.llm_tools import harness_yaml
    from metaopt.task_agent.harness_io import load_harness, resolve_harness

    data = yaml.safe_load(harness_yaml(load_harness(resolve_harness("minimal"))))
    data["routing"]["limits"]["max_turns"] = 32
    data["prompts"]["system"] += " " + PROMPT_LINE
    path = tmp / "meta.yaml"
    path.write_text(yaml.safe_dump([{"tool": "write_revision", "arguments": {
        "harness_yaml": yaml.safe_dump(data, sort_keys=False), "cites": [], "cause": "turn limit",
        "fixes": [], "keeps": [],
        "rationale": "episodes run out of turns; raise max_turns to 32 and ask for a check"}}]))
    return f"fake/script:{path}"


@pytest.fixture(scope="module")
def store(docker_image, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("explorer")
    ds, db = make_tasks(tmp / "ds", n_long=5, n_short=1), tmp / "s.duckdb"
    r = metaopt("run", "--benchmark", "terminalbench", "--dataset", str(ds), "--harness", "minimal",
                "--model", "fake/solution", "--meta-model", _revision_script(tmp), "--trials", "1",
                "--split", "0.34,0.33,0.33", "--max-iterations", "1", "--db", str(db), "--json", timeout=900)
    assert r.returncode == 0, r.stderr
    r2 = metaopt("eval", "--benchmark", "terminalbench", "--dataset", str(ds), "--model", "fake/nop",
                 "--tasks", "steps-05", "--db", str(db), "--json")
    assert r2.returncode == 0, r2.stderr
    hack = [f for f in FAMILIES if f[0] == "conftest-at-root"]
    write_dataset(tmp / "hack", hack, control=False)
    r3 = metaopt("eval", "--benchmark", "terminalbench", "--dataset", str(tmp / "hack"), "--model", "fake/solution",
                 "--tasks", "conftest-at-root-harbor", "--db", str(db), "--json")
    assert r3.returncode == 0, r3.stderr
    return {"db": db, "experiment": json.loads(r.stdout)["experiment_id"], "eval_run": json.loads(r2.stdout)["run_id"],
            "tampered": json.loads(r3.stdout)["run_id"] + "/conftest-at-root-harbor/0"}


@pytest.fixture(scope="module")
def server(store) -> Iterator[str]:
    with ui_server("--db", str(store["db"])) as address:
        yield address


def api(base: str, path: str, **params) -> dict:
    with urllib.request.urlopen(f"{base}api/{path}?{urlencode(params)}") as r:
        return json.loads(r.read())


def test_experiment_page_shows_progress_gate_and_the_changed_prompt_line(server, store, page):
    page.goto(server)
    page.click(f"text={store['experiment']}")
    page.wait_for_selector("svg.progress circle")
    assert page.locator("svg.progress circle").count() >= 2  # baseline and the revision
    text = page.inner_text("main")
    assert "baseline" in text and "by llm" in text and "raise max_turns to 32" in text
    assert "select" in page.inner_text("table")  # the gate's looks with their numbers
    assert "sealed test: baseline" in text and "alpha committed" in text  # the report, with the alpha it spent
    added = page.locator(".diff .add").all_inner_texts()
    assert any(PROMPT_LINE in line for line in added), added
    assert any("32" in line for line in added)
    assert not any(PROMPT_LINE in line for line in page.locator(".diff .del").all_inner_texts())


def test_a_failed_trial_is_found_from_the_failures_view(server, store, page):
    page.goto(server + "#/failures")
    page.wait_for_selector(".group h3")
    causes = page.locator(".group h3").all_inner_texts()
    assert any(c.startswith("turn limit") for c in causes), causes  # minimal's 8 turns vs 12 steps
    assert any(c.startswith("verifier failure") for c in causes), causes  # fake/nop did nothing
    group = page.locator(".group", has_text="turn limit")
    group.locator("a", has_text="span ").first.click()
    page.wait_for_selector("#verifier")
    assert page.locator("svg.waterfall g.span").count() > 5
    assert page.locator("svg.waterfall g.selected").count() == 1  # the agent span that hit the limit
    text = page.inner_text("main")
    assert "outcome turn_limit" in text and "You are an agent in a Linux container" in text
    assert "echo 1 >> /app/out.txt" in text  # tool call arguments
    assert "failed" in page.inner_text("#verifier table")  # per-test result


def test_a_tampered_trial_shows_its_evidence(server, store, page):
    page.goto(server + "#/failures")
    page.wait_for_selector(".group h3")
    assert any(c.startswith("tampered") for c in page.locator(".group h3").all_inner_texts())
    page.goto(server + "#/trial?" + urlencode({"id": store["tampered"]}))
    page.wait_for_selector("#integrity table")
    text = page.inner_text("#integrity")
    assert "pytest-config-planted" in text and "/conftest.py" in text and "without the tamper verdict: passed" in text
    assert page.locator("span.status-tampered").count() >= 1


def test_matrix_marks_fixed_tasks_and_opens_the_paired_view(server, store, page):
    page.goto(server + "#/matrix?" + urlencode({"experiment": store["experiment"]}))
    page.wait_for_selector("table.matrix")
    assert page.locator("td.fixed").count() >= 1  # the revision fixed the 12-step tasks
    page.select_option("#cmp-a", index=0)
    page.select_option("#cmp-b", index=1)
    row = page.locator("table.matrix tr", has=page.locator("td.fixed")).first
    task = row.locator("td a.task").inner_text()
    row.locator("td a.task").click()
    page.wait_for_selector("table.steps")
    assert page.url.split("#")[1].startswith("/paired?") and f"Task {task}: c0 vs c1" in page.inner_text("h2")
    left, right = page.locator(".cols").first.locator(".side").all_inner_texts()
    assert "failed" in left and "passed" in right
    assert "turn limit 8 reached" in left and "the agent called finish" in right  # each episode's end
    assert page.locator("tr.end-row td.end-turn_limit").count() == 1  # marked after the last aligned step
    assert any(PROMPT_LINE in x for x in page.locator(".diff .add").all_inner_texts())  # the child's own prompt
    page.goto(server + "#/compare?" + urlencode({"task": task, "a": store["experiment"] + "/c0",
                                                 "b": store["experiment"] + "/c1"}))
    page.wait_for_selector("table.steps")  # the older address opens the same paired view
    assert page.url.split("#")[1].startswith("/paired?")


def test_a_candidate_has_a_page_of_its_own_that_lineage_links_to(server, store, page):
    page.goto(server + "#/lineage?" + urlencode({"experiment": store["experiment"]}))
    page.wait_for_selector("ul.lineage")
    page.locator("ul.lineage a", has_text="c1").click()
    page.wait_for_selector("table.cand-tasks")
    assert page.url.split("#")[1] == "/candidate?" + urlencode({"id": store["experiment"] + "/c1"})
    text = page.inner_text("main")
    assert text.startswith("Candidate c1") and "parent c0" in text and "raise max_turns to 32" in text
    fixed = page.locator("table.cand-tasks tr", has=page.locator("td.better")).first
    fixed.locator("a", has_text="paired view").click()
    page.wait_for_selector("table.steps")
    assert "c0 vs c1" in page.inner_text("h2")


def test_failure_details_say_where_the_episode_stopped_and_search_finds_span_outcomes(server, store, page):
    page.goto(server + "#/failures?" + urlencode({"experiment": store["experiment"]}))
    page.wait_for_selector(".group h3")
    details = page.locator(".group", has_text="turn limit").first.locator("td.detail").all_inner_texts()
    assert details and all(d.startswith("turn limit 8 reached; 1 of 1 tests failed") for d in details), details
    page.goto(server + "#/search?q=TURN_LIMIT")
    page.wait_for_selector("table.span-hits")
    assert "turn_limit" in page.inner_text("table.span-hits")
    page.locator("table.span-hits a").first.click()
    page.wait_for_selector("#episode-end")
    assert page.inner_text("#episode-end") == "episode ended: turn limit 8 reached"


def test_search_finds_message_text_and_links_to_the_span(server, page):
    page.goto(server + "#/search")
    page.fill("#q", "ECHO 12 >>")  # case-insensitive
    page.press("#q", "Enter")
    page.wait_for_selector("main table a")
    assert "searched everything" in page.inner_text("main")
    page.locator("main table a").first.click()
    page.wait_for_selector(".entry.selected")
    assert "echo 12" in page.inner_text(".entry.selected")


def test_large_texts_load_lazily(server, store, page):
    tid = api(server, "failures", experiment=store["experiment"])["data"][0]["trials"][0]["trial_id"]
    cut = api(server, "trial", id=tid, cut=20)["data"]
    assert cut["transcript"][0]["cut"] and "more characters" in cut["transcript"][0]["parts"][0]["content"]
    page.goto(server + "#/trial?" + urlencode({"id": tid, "cut": 20}))
    page.wait_for_selector("button:has-text('load all')")
    page.locator("button:has-text('load all')").first.click()
    page.wait_for_selector("text=Call finish when done.")


def test_json_endpoints_and_terminal_views_are_the_same_data(server, store):
    db, exp = str(store["db"]), store["experiment"]
    for cmd, path, params in ((["matrix", exp], "matrix", {"experiment": exp}),
                              (["causes"], "failures", {}),
                              (["experiment", exp], "experiment", {"id": exp})):
        r = metaopt("traces", *cmd, "--db", db, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == api(server, path, **params)["data"]
    r = metaopt("traces", "matrix", exp, "--db", db)
    assert "+" in r.stdout and "steps-" in r.stdout
    tid = api(server, "failures", experiment=exp)["data"][0]["trials"][0]["trial_id"]
    r = metaopt("traces", "spans", tid, "--db", db, "--json")
    spans = json.loads(r.stdout)
    assert spans == api(server, "trial", id=tid)["data"]["spans"]
    assert spans[0]["operation_name"] == "invoke_agent" and any(s["input_tokens"] for s in spans)


def test_unknown_ids_are_a_message_in_the_page_and_the_terminal(server, store, page):
    page.goto(server + "#/trial?id=no-such-trial")
    page.wait_for_selector(".error")
    assert "no trial 'no-such-trial'" in page.inner_text(".error")
    page.goto(server + "#/experiment?id=exp-nope")
    page.wait_for_selector(".error")
    assert "no experiment 'exp-nope'" in page.inner_text(".error")
    with pytest.raises(urllib.error.HTTPError) as e:
        api(server, "trial", id="no-such-trial")
    assert e.value.code == 404 and "Traceback" not in e.value.read().decode()
    r = metaopt("traces", "compare", "steps-00", "a", "b", "--db", str(store["db"]))
    assert r.returncode == 2 and "no trial of task 'steps-00' under 'a'" in r.stderr and "Traceback" not in r.stderr


def test_a_running_eval_is_not_blocked_and_shows_up(server, store):
    """Last in this module: it adds a run to the shared store. `metaopt eval` writes the store
    the running `metaopt ui` reads; the eval must succeed and its trials appear in the views."""
    ds = store["db"].parent / "ds"
    proc = subprocess.Popen([sys.executable, "-m", "metaopt.cli", "eval", "--benchmark", "terminalbench",
                             "--dataset", str(ds), "--model", "fake/nop", "--tasks", "steps-04,steps-05",
                             "--db", str(store["db"]), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    polls = 0
    while proc.poll() is None:  # browse while it writes
        api(server, "overview")
        api(server, "failures")
        polls += 1
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert polls > 3
    run_id = json.loads(out)["run_id"]
    deadline = time.monotonic() + 20
    while True:
        runs = {r["run_id"]: r for r in api(server, "overview")["data"]["runs"]}
        if run_id in runs and runs[run_id]["trials"] == 2:
            break
        assert time.monotonic() < deadline, runs
        time.sleep(0.3)
    causes = {g["cause"]: g for g in api(server, "failures", run=run_id)["data"]}
    assert causes["verifier failure"]["count"] == 2
