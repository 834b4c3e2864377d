"""`metaopt diagnose`, the explorer's clusters and paired pages, and `metaopt report`, over a real
store: an offline experiment in process on LocalSandbox (minimal harness, fake/solution, the
heuristic proposer) whose 12-step tasks hit minimal's 8-turn limit and whose `slow-*` tasks run a
command past their agent timeout. The explorer is `metaopt ui --port 0` in a subprocess; the pages
are checked in Debian's chromium (Playwright)."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
import yaml
from _local_tasks import step_tasks
from _shared_runs import ui_server

from metaopt.benchmarks.task import Environment, Solution, Task, Verifier
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import plan_experiment, start_experiment
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

XSS = '<img src=x onerror="window.pwned=1"><script>window.pwned=1</script>'


def slow_tasks(root: Path, n: int) -> list[Task]:
    """Tasks whose solution sleeps past the 2 s agent timeout: each trial is a `timeout`."""
    out = []
    for i in range(n):
        d = root / f"slow-{i:02d}"
        d.mkdir(parents=True)
        (d / "check.sh").write_text("echo 0 > /logs/verifier/reward.txt\n")
        out.append(Task(id=f"slow-{i:02d}", benchmark="local-steps", format="local", source_dir=d,
                        instruction="Wait for the build.", environment=Environment(image="host"), workdir="/app",
                        agent_timeout_s=2, scoring="reward", solution=Solution(steps=["sleep 30"]),
                        verifier=Verifier(files=[(d / "check.sh", "/tests/check.sh")], command="bash /tests/check.sh",
                                          timeout_s=30)))
    return out


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metaopt", *args], capture_output=True, text=True, check=False,
                          timeout=120)


@pytest.fixture(scope="module")
def run(local_backend, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("diagnose")
    tasks = step_tasks(tmp / "tasks", n_long=6, n_short=2) + slow_tasks(tmp / "tasks", 2)
    cfg = RunConfig(benchmark="local-steps", model="fake/solution", trials=1, split=(0.4, 0.4, 0.2), max_iterations=1,
                    concurrency=2, meta_model="heuristic")
    db = tmp / "s.duckdb"
    with Store(db) as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(cfg, "minimal", tasks), store=store, backend=local_backend, tracing=tracing)
        exp.run()
        tracing.shutdown()
        timeouts = store.rows("SELECT count(*) AS n FROM trials WHERE experiment_id = ? AND status = 'timeout'", [exp.id])
        turn = store.rows(  # failing trials whose episode hit the turn limit, counted from the spans
            "SELECT count(DISTINCT t.trial_id) AS n FROM trials t JOIN spans s USING (trial_id) WHERE t.experiment_id = ?"
            " AND t.status = 'failed' AND s.operation_name = 'invoke_agent'"
            " AND s.attributes->>'$.\"metaopt.outcome\"' = 'turn_limit'", [exp.id])
        child = store.rows("SELECT candidate_id, parent_id, status FROM candidates WHERE experiment_id = ? AND iteration = 1",
                           [exp.id])[0]
    return {"db": db, "tmp": tmp, "experiment": exp.id, "timeouts": timeouts[0]["n"], "turn_limit": turn[0]["n"],
            "child": child}


@pytest.fixture(scope="module")
def diagnosed(run) -> dict:
    """`metaopt diagnose --json` twice: plain, then with a scripted model answering each cluster
    (each answer carries markup, a claim citing a span of another cluster and one citing nothing)."""
    r = cli("diagnose", run["experiment"], "--db", str(run["db"]), "--json")
    assert r.returncode == 0, r.stderr
    plain = json.loads(r.stdout)
    cl = plain["clusters"]
    other = [cl[1 if i == 0 else 0]["examples"][0]["span_id"] for i in range(len(cl))]  # real spans, other clusters
    steps = [{"text": json.dumps({"summary": f"{XSS} the episodes stop early", "claims": [
        {"text": f"the agent span ends the episode {XSS}", "spans": [c["examples"][0]["span_id"]]},
        {"text": "cites a span of another cluster", "spans": [other[i]]},
        {"text": "cites nothing", "spans": []}]})} for i, c in enumerate(cl)]
    script = run["tmp"] / "diagnoser.yaml"
    script.write_text(yaml.safe_dump(steps))
    r = cli("diagnose", run["experiment"], "--db", str(run["db"]), "--model", f"fake/script:{script}", "--json")
    assert r.returncode == 0, r.stderr
    return {"plain": plain, "model": json.loads(r.stdout)}


def test_turn_limit_and_timeout_failures_get_their_own_clusters_with_correct_counts(run, diagnosed):
    clusters = diagnosed["plain"]["clusters"]
    by_mode: dict[str, list[dict]] = {}
    for c in clusters:
        by_mode.setdefault(c["signature"]["mode"], []).append(c)
        assert sum(c["tasks"].values()) == sum(c["candidates"].values()) == c["size"] == len(c["trial_ids"])
    assert run["timeouts"] > 0 and run["turn_limit"] > 0
    (timeout,), (turn,) = by_mode["timeout"], by_mode["turn limit"]
    assert timeout["size"] == run["timeouts"] and turn["size"] == run["turn_limit"]
    assert set(timeout["tasks"]) <= {"slow-00", "slow-01"} and all(t.startswith("steps-") for t in turn["tasks"])
    assert timeout["signature"] == {"mode": "timeout", "error": "timeout", "tool": "bash", "exit_status": "124",
                                    "where": "last third"}
    assert turn["signature"]["where"] == "end" and turn["signature"]["tool"] == "bash"
    assert [c["size"] for c in clusters] == sorted((c["size"] for c in clusters), reverse=True)
    assert diagnosed["plain"]["failing"] == sum(c["size"] for c in clusters)


def test_a_diagnosis_keeps_only_claims_citing_spans_of_its_cluster_and_is_stored(run, diagnosed):
    for c in diagnosed["model"]["clusters"]:
        d = c["diagnosis"]
        assert d["model"].startswith("fake/script:") and "the episodes stop early" in d["summary"]
        assert [x["spans"] for x in d["claims"]] == [[c["examples"][0]["span_id"]]]  # the other two are dropped
        assert d["dropped"] == 2
    d = diagnosed["model"]["clusters"][0]["diagnosis"]
    r = cli("diagnose", run["experiment"], "--db", str(run["db"]), "--json")  # no --model: the stored ones stay
    assert json.loads(r.stdout)["clusters"][0]["diagnosis"] == d
    r = cli("diagnose", "no-such-experiment", "--db", str(run["db"]))
    assert r.returncode == 2 and "no experiment or run 'no-such-experiment'" in r.stderr


def test_the_meta_agent_sees_the_clusters_of_the_failing_train_trials_only(run):
    from metaopt.meta_agent.proposers.history_view import clusters_text

    with Store(run["db"], read_only=True) as store:
        train = [r["trial_id"] for r in store.rows(
            "SELECT trial_id FROM trials WHERE experiment_id = ? AND candidate_id = ? AND split = 'train'"
            " AND status != 'passed'", [run["experiment"], run["child"]["parent_id"]])]
        full, brief = clusters_text(store, train), clusters_text(store, train, brief=True)
    assert "turn limit: bash exit 0 (end)" in full and f"over {len(train)} failing train trial(s)" in full
    assert ":validation/" not in full and ":test/" not in full  # held-out trials never reach the meta-agent
    assert brief.startswith("Failure clusters (failure_clusters shows them): ") and "turn limit" in brief


@pytest.fixture(scope="module")
def server(run, diagnosed) -> Iterator[str]:
    with ui_server("--db", str(run["db"])) as address:
        yield address


def _request(base: str, method: str, path: str, host: str | None = None, headers: dict | None = None):
    u = urlsplit(base)
    con = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    con.putrequest(method, path, skip_host=True)
    con.putheader("Host", host or u.netloc)
    for k, v in (headers or {}).items():
        con.putheader(k, v)
    con.endheaders()
    r = con.getresponse()
    body = r.read().decode()
    con.close()
    return r.status, body


def test_the_server_answers_only_its_own_host_and_changes_need_the_page_token(server):
    port = urlsplit(server).port
    assert _request(server, "GET", "/api/overview")[0] == 200
    assert _request(server, "GET", "/api/overview", host=f"localhost:{port}")[0] == 200
    for host in (f"rebound.example:{port}", "127.0.0.1:1", f"127.0.0.1.evil.example:{port}"):
        status, body = _request(server, "GET", "/api/overview", host=host)
        assert status == 421 and "experiment" not in body, host
    assert _request(server, "GET", "/", host=f"evil.example:{port}")[0] == 421
    status, page = _request(server, "GET", "/")
    token = re.search(r'name="metaopt-token" content="([^"]+)"', page).group(1)
    assert _request(server, "POST", "/api/refresh")[0] == 403
    assert _request(server, "POST", "/api/refresh", headers={"X-Metaopt-Token": "wrong"})[0] == 403
    assert _request(server, "POST", "/api/refresh", headers={"X-Metaopt-Token": token})[0] == 200
    assert _request(server, "POST", "/api/refresh", host=f"evil.example:{port}",
                    headers={"X-Metaopt-Token": token})[0] == 421


def test_the_pages_render_clusters_citations_and_a_task_under_parent_and_child(server, run, diagnosed, page):
    exp = run["experiment"]
    page.goto(server + "#/clusters?" + urlencode({"experiment": exp}))
    page.wait_for_selector("section.cluster")
    heads = page.locator("section.cluster h3").all_inner_texts()
    sizes = [int(h.split(" ")[0]) for h in heads]
    assert sizes == sorted(sizes, reverse=True) and any("turn limit" in h for h in heads) and any("timeout" in h for h in heads)
    first = page.locator("section.cluster").first
    assert XSS in first.locator(".diagnosis").inner_text()  # model text shown as text, never markup
    assert first.locator(".diagnosis img, .diagnosis script").count() == 0
    assert page.evaluate("window.pwned === undefined")
    cited = diagnosed["model"]["clusters"][0]["diagnosis"]["claims"][0]["spans"][0]
    first.locator("a.cite").first.click()  # a citation opens the cited span in its trial
    page.wait_for_selector("svg.waterfall g.selected")
    assert page.locator(f'svg.waterfall g.selected[data-span="{cited}"]').count() == 1
    # the paired page: the parent's and the child's trials of one task side by side, steps aligned
    child = run["child"]
    page.goto(server + "#/paired?" + urlencode({"b": child["candidate_id"]}))
    page.wait_for_selector("table.steps")
    sides = page.locator(".cols").first.locator(":scope > div").all_inner_texts()
    assert "baseline" in sides[0] and child["status"] in sides[1]
    task = page.locator("#paired-task").input_value()
    assert f"c0:train/{task}/0" in sides[0] and f"c1:train/{task}/0" in sides[1]  # a train task the child fixed
    assert "failed" in sides[0] and "passed" in sides[1]
    assert page.locator("table.steps tr.same").count() >= 8  # minimal's 8 turns, the same calls on both sides
    assert any("max_turns" in x and "16" in x for x in page.locator(".diff .add").all_inner_texts())  # the harness diff
    assert "mean diff" in page.inner_text("main") and "gate's decisions on this pair" in page.inner_text("main")
    page.reload()  # a deep link lands on the same view
    page.wait_for_selector("table.steps")
    assert page.locator("#paired-task").input_value() == task


def test_the_report_is_one_offline_page_with_the_story_and_no_markup_from_agents(run, diagnosed, page, tmp_path):
    out = tmp_path / "report.html"
    r = cli("report", run["experiment"], "--html", str(out), "--db", str(run["db"]))
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "<script" not in html and XSS not in html and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.goto(out.as_uri())
    text = page.inner_text("body")
    for heading in ("Result: the sealed test", "Baseline", "Progress", "Candidates and the gate's decisions",
                    "Failure clusters", "The winning diff", "Why it stopped"):
        assert heading in text
    assert "max_turns" in page.inner_text("pre.diff")  # the accepted child's diff
    assert XSS in text and page.evaluate("window.pwned === undefined")
    assert page.locator("svg").count() == 2 and requests == [out.as_uri()]  # nothing fetched: no network needed
