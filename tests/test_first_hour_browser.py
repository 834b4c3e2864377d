"""A newcomer's first hour, in a real browser (Debian's chromium driven by Playwright): README ->
run -> report -> explorer (candidate page, paired view, clusters, search) -> export.

The run is the README's offline command exactly as written there, in a fresh folder (the shared
`readme_run`, tests/_shared_runs.py): on the 26 sample tasks minimal's 8-turn limit and 10 s bash
timeout fail some, and the heuristic proposer's one revision fixes them. Every command after the
run is one that `metaopt run` printed as a next step, run in the run's folder."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from _docker_fixtures import metaopt
from _shared_runs import ui_server

from metaopt.traces.store import Store

pytestmark = [pytest.mark.usefixtures("docker_image"), pytest.mark.slow]


def _command(line: str) -> list[str]:
    """A next-step line as argv: the command up to its explanation (two spaces or more)."""
    return shlex.split(re.split(r"\s{2,}", line.strip())[0])[1:]


@pytest.fixture(scope="module")
def server(readme_run) -> Iterator[str]:
    with ui_server(*_command(readme_run["next"]["ui"])[1:], cwd=readme_run["tmp"]) as address:
        yield address


def test_the_run_ends_with_the_next_commands_filled_in(readme_run):
    exp = readme_run["experiment"]
    assert set(readme_run["next"]) == {"report", "diagnose", "ui", "export"}, readme_run["stdout"][-2000:]
    assert exp in readme_run["next"]["report"] and exp in readme_run["next"]["diagnose"]
    assert "c1" in readme_run["next"]["export"]  # the winner, by the id the explorer shows


def test_the_report_leads_with_the_sealed_test_and_labels_the_canaries(readme_run, page):
    argv = _command(readme_run["next"]["report"])
    html = readme_run["tmp"] / "report.html"
    if "--html" in argv:  # the printed command writes the page: into the test's folder
        argv[argv.index("--html") + 1] = str(html)
    else:
        argv += ["--html", str(html)]
    r = metaopt(*argv, cwd=readme_run["tmp"], timeout=120)
    assert r.returncode == 0, r.stderr
    text = metaopt("report", readme_run["experiment"], "--db", str(readme_run["db"]), timeout=120)
    assert text.returncode == 0, text.stderr  # plain text without --html
    assert "sealed test" in "\n".join(text.stdout.splitlines()[:6]), text.stdout[:1500]  # the result first
    assert "failed as designed" in text.stdout  # the winner's canaries, named as canaries
    page.goto(html.as_uri())
    page.wait_for_selector("h2")
    assert page.locator("h2").first.inner_text().startswith("Result")
    lead = page.inner_text("body").split("\nBaseline\n")[0]  # the result section, before the baseline's
    assert re.search(r"\d\.\d\d \[\d\.\d\d, \d\.\d\d\]", lead)  # intervals formatted, not raw floats
    assert not re.search(r"\d\.\d{6,}", lead), lead


def test_the_explorer_walk_candidate_paired_clusters_and_search(readme_run, server, page):
    exp = readme_run["experiment"]
    page.goto(server)
    page.click(f"text={exp}")
    page.wait_for_selector("svg.progress circle")
    page.locator("section.candidate h3 a", has_text="c1").first.click()  # the winner's own page
    page.wait_for_selector("table.cand-tasks")
    assert page.url.endswith("#/candidate?" + urlencode({"id": f"{exp}/c1"}))
    text = page.inner_text("main")
    assert text.startswith("Candidate c1 accepted") and "head" in text and "max_turns" in text
    canaries = page.locator("table.cand-tasks td.canary").all_inner_texts()
    assert canaries and all(c == "canary: failed as designed" for c in canaries), canaries
    page.locator("table.cand-tasks tr", has=page.locator("td.better")).first.locator("a", has_text="paired view").click()
    page.wait_for_selector("table.steps")
    left, right = page.locator(".cols").first.locator(".side").all_inner_texts()
    assert "failed" in left and "passed" in right
    assert "episode ended: " in page.inner_text("tr.end-row")
    page.goto(server + "#/clusters?" + urlencode({"experiment": exp}))
    page.wait_for_selector("section.cluster")
    labels = page.locator("section.cluster h3").all_inner_texts()
    assert any("turn limit" in x for x in labels) and any("timeout" in x for x in labels), labels
    assert not any("verifier failure" in x for x in labels), labels  # the canaries make no cluster
    page.goto(server + "#/matrix?" + urlencode({"experiment": exp}))
    page.wait_for_selector("table.matrix")
    assert page.locator("td.canary").count() >= 1 and page.locator("td.canary.tampering").count() == 0
    page.goto(server + "#/search?q=timeout")
    page.wait_for_selector("table.span-hits")
    with Store(readme_run["db"], read_only=True) as s:  # the tasks whose bash calls ran past 10 s
        slow = {r["task_id"] for r in s.rows("SELECT DISTINCT task_id FROM spans WHERE tool_name = 'bash' "
                                             "AND error_type = 'timeout'")}
    hits = page.inner_text("table.span-hits")
    assert slow and any(t in hits for t in slow), (slow, hits[:500])


def test_the_winner_exports_with_the_printed_command(readme_run):
    argv = _command(readme_run["next"]["export"])
    out = readme_run["tmp"] / "my_agent"
    if "--out" in argv:
        argv[argv.index("--out") + 1] = str(out)
    else:
        argv += ["--out", str(out)]
    r = metaopt(*argv, cwd=readme_run["tmp"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert (out / "pyproject.toml").is_file()
    assert f"{readme_run['experiment']}_c1".replace("-", "_") in (out / "pyproject.toml").read_text().replace("-", "_")
