"""The meta-agent's memory inside the loop, in process on LocalSandbox with a scripted meta-model:
three proposals from the same parent. The first (a prompt line that cannot fix a turn limit) is
rejected; the second sees that rejection (reason and diff) through its history tools and adds a
tool no task calls, which ends `inconclusive` (its change never ran); the third raises the turn
limit and is accepted. Every claim is checked against the real train outcomes, and every session
is a trace linked from its candidate."""

from __future__ import annotations

import pytest
from _memory_helpers import scripted_experiment

from metaopt.meta_agent.proposers import history as hist
from metaopt.meta_agent.records import Candidate, GateDecision
from metaopt.traces.store import Store


@pytest.fixture(scope="module")
def backend(local_backend):
    return local_backend


def test_second_proposal_sees_the_rejection_claims_are_checked_and_dead_changes_are_inconclusive(tmp_path, backend):
    db, exp_id, failing, passing, out = scripted_experiment(tmp_path, backend)
    with Store(db) as store:
        c = {x.iteration: x for x in store.select(Candidate, "experiment_id = ?", [exp_id])}
        gates = store.select(GateDecision, "experiment_id = ?", [exp_id], order="decided_at")
        sessions = {x.iteration: store.rows(
            "SELECT name, operation_name FROM spans WHERE trace_id = ? ORDER BY start_ns", [x.proposal_trace_id])
            for x in c.values() if x.proposal_trace_id}
        seen_by_2 = store.rows("SELECT string_agg(text, '\n') AS t FROM messages WHERE trace_id = ? AND"
                               " direction = 'tool_result'", [c[2].proposal_trace_id])[0]["t"]
        notes = hist.notes(store, exp_id)

    assert [c[i].status for i in (1, 2, 3)] == ["rejected", "inconclusive", "accepted"], [c[i].status_reason for i in c]
    # the second proposal saw the first one's rejection, its reason and its diff, in its tool results
    assert "c1 (parent c0, by llm): rejected: fail: child mean" in seen_by_2
    assert "+Work step by step." in seen_by_2 or "Work step by step." in seen_by_2.split("diff against the parent:")[1]
    assert "claim:" in seen_by_2 and "did not do what it claimed" in seen_by_2
    # predictions checked against real train outcomes
    assert c[1].prediction_check.verdict == "not_as_claimed" and c[1].prediction_check.misses == failing
    assert c[3].prediction_check.verdict == "as_claimed" and c[3].prediction_check.hits == failing
    assert c[3].prediction_check.kept == passing
    final = [g for g in gates if g.candidate_id == c[3].candidate_id][-1]
    assert final.stage == "verdict" and "claim: did what it claimed" in final.reason
    # the tool nobody calls: not live, so inconclusive whatever the screen said
    assert c[2].liveness.live is False and "never called lint" in c[2].liveness.reason
    assert c[2].status_reason.startswith("inconclusive: not live") and c[3].liveness.live is True
    # every proposal is a traced session linked from its candidate
    for i in (1, 2, 3):
        assert sessions[i][0]["name"] == "invoke_agent meta-agent"
        assert {s["operation_name"] for s in sessions[i]} == {"invoke_agent", "chat", "execute_tool"}
    assert [n.text for n in notes][:1] == ["ask for care"] and len(notes) == 3
    assert [x.proposal_trace_id for x in out.candidates[1:]] == [c[i].proposal_trace_id for i in (1, 2, 3)]
    assert out.candidates[3].prediction_check["verdict"] == "as_claimed"
    assert out.candidates[2].predictions["cause"] == "no way to check files"
