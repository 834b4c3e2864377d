"""The explorer's view of the meta-agent's memory, in a real headless browser, over an offline run
(three scripted proposals in process on LocalSandbox, tests/_memory_helpers.scripted_experiment):
the rejected candidate, the next proposal's reasoning that cites it, the checked predictions,
liveness, the notebook, and each proposal's transcript opened from its candidate."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from _memory_helpers import scripted_experiment
from _shared_runs import ui_server

from metaopt.sandbox.local import LocalBackend


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("explorer-memory")
    backend = LocalBackend(tmp / "sandboxes")
    try:
        backend.ping()
    except Exception as e:  # noqa: BLE001 - say why, do not fail every test
        pytest.skip(str(e))
    try:
        db, exp_id, _, _, out = scripted_experiment(tmp, backend)
    finally:
        backend.prune()
    return {"db": db, "experiment": exp_id, "report": out}


@pytest.fixture(scope="module")
def server(run) -> Iterator[str]:
    with ui_server("--db", str(run["db"])) as address:
        yield address


def test_the_candidate_view_shows_rejection_reasoning_checked_claims_and_liveness(server, run, page):
    page.goto(server + "#/experiment?" + urlencode({"id": run["experiment"]}))
    page.wait_for_selector("section.candidate")
    c1, c2, c3 = (page.locator(f"#cand-c{i}").inner_text() for i in (1, 2, 3))
    assert "rejected" in c1 and "prediction check: did not do what it claimed" in c1
    assert "c1's prompt line was rejected" in c2  # the next proposal's reasoning, citing the rejection
    assert "inconclusive" in c2 and "did not run" in c2 and "never called lint" in c2
    assert "accepted" in c3 and "prediction check: did what it claimed" in c3 and "claim: did what it claimed" in c3
    assert "cause: episodes hit the turn limit" in c3
    notebook = page.locator("ol.notebook").inner_text()
    assert "ask for care" in notebook and "the turn limit is the cause" in notebook
    assert page.locator("text=Meta-agent sessions").count() == 1


def test_a_proposal_transcript_opens_from_its_candidate(server, run, page):
    page.goto(server + "#/experiment?" + urlencode({"id": run["experiment"]}))
    page.wait_for_selector("#cand-c2")
    page.locator("#cand-c2 a", has_text="proposal transcript").click()
    page.wait_for_selector("svg.waterfall")
    text = page.inner_text("main")
    assert "invoke_agent meta-agent" in text and "outcome revision" in text
    assert "tool history" in text and "tool read_candidate" in text and "tool write_revision" in text
    assert "c1 (parent c0, by llm): rejected" in text  # what the history tool returned, in the transcript
    assert page.locator("svg.waterfall g.span").count() >= 9  # agent + 4 chats + 4 tool calls
