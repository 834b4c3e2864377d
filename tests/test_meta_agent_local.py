"""The meta-agent driven by a real small model (`local/...`: llama.cpp embedded in this process,
pulled on first use if scripts/setup.sh has not), inside a real experiment on LocalSandbox trials
with fake/solution as the task model. Protocol facts, not proposal quality: a real proposal
reaches the guard (valid, or refused with a reason); over two proposals the second one consults
the history and the notebook gets entries. Bounded: temperature 0, the compact profile (10 turns,
512 output tokens a turn), a handful of tasks, one trial each.

The tasks have two causes of failure a harness controls, so one revision cannot fix everything and
a second proposal always has failing trials to read: 20-step tasks against minimal's 8 turns (more
than the 2x the briefing suggests), and tasks with a step slower than minimal's 10 s bash timeout."""

from __future__ import annotations

import pytest
from _local_tasks import step_tasks

from metaopt.benchmarks.task import Solution
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import plan_experiment, start_experiment
from metaopt.meta_agent.proposers import history as hist
from metaopt.meta_agent.records import Candidate, GateDecision
from metaopt.task_agent.models import allow_model_requests
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing


@pytest.fixture(scope="module")
def backend(local_backend):
    return local_backend


def two_cause_tasks(root):
    tasks = step_tasks(root, n_long=3, n_short=3, long=20)
    for i, t in enumerate(tasks[3:5]):  # two of the short ones get a slow first step (> the 10 s bash timeout)
        tasks[3 + i] = t.model_copy(update={"solution": Solution(steps=["sleep 11 && echo 1 >> /app/out.txt"])})
    return tasks


def run(tmp_path, backend, model: str, **cfg) -> tuple[dict, list[Candidate], list[GateDecision], dict, list]:
    config = RunConfig(benchmark="local-steps", model="fake/solution", meta_model=model, trials=1,
                       split=(0.5, 0.25, 0.25), concurrency=2, **cfg)
    with allow_model_requests(), Store(tmp_path / "s.duckdb") as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(config, "minimal", two_cause_tasks(tmp_path / "tasks")), store=store,
                               backend=backend, tracing=tracing, on_event=print)
        out = exp.run()
        tracing.shutdown()
        cands = store.select(Candidate, "experiment_id = ?", [exp.id], order="iteration")
        gates = store.select(GateDecision, "experiment_id = ?", [exp.id], order="decided_at")
        sessions = {}
        for s in store.rows("SELECT trace_id, start_ns FROM spans WHERE run_id = ? AND operation_name = 'invoke_agent'"
                            " ORDER BY start_ns", [f"{exp.id}:proposals"]):
            sessions[s["trace_id"]] = store.rows(
                "SELECT operation_name, tool_name, provider, request_model, input_tokens, output_tokens FROM spans"
                " WHERE trace_id = ? ORDER BY start_ns", [s["trace_id"]])
            sessions[s["trace_id"]].append({"operation_name": "briefing", "text": "\n".join(
                r["text"] or "" for r in store.rows("SELECT text FROM messages WHERE trace_id = ? AND direction = 'input'"
                                                    " AND role = 'user' ORDER BY idx LIMIT 1", [s["trace_id"]]))})
        notes = hist.notes(store, exp.id)
    return out, cands, gates, sessions, notes


@pytest.mark.slow
@pytest.mark.usefixtures("local_model")
@pytest.mark.timeout(3000)
def test_two_real_proposals_reach_the_guard_and_the_second_consults_the_history(tmp_path, backend):
    """One run of the real 1.5B serves both facts (a run per fact cost minutes each): every
    session is traced turn by turn within the compact profile's cap, each proposal reaches the
    guard, and the second proposal's session reads the history."""
    out, cands, gates, sessions, notes = run(tmp_path, backend, "local/qwen2.5-coder-1.5b", max_iterations=2,
                                             plateau=3)
    assert sessions, "no meta-agent session was traced"
    for spans in sessions.values():
        chats = [s for s in spans if s["operation_name"] == "chat"]
        assert chats and all(s["provider"] == "llama.cpp" and s["input_tokens"] > 0 for s in chats)
        assert len(chats) <= 10  # the compact profile's turn cap
    written = [c for c in cands[1:] if c.proposal_trace_id]
    for c in written:  # reached the guard: refused with a reason, or passed it (the smoke run / screen decided)
        first = next(g for g in gates if g.candidate_id == c.candidate_id)
        assert (first.stage == "guard" and first.reason.startswith("invalid: ")) or first.stage in ("smoke", "screen")
        assert c.predictions is not None and c.proposal_trace_id in sessions
    assert len(written) >= 2, f"{len(written)} proposal(s) with a revision: {out.stop_reason}"
    second = sessions[written[1].proposal_trace_id]
    # The history reaches the second session in its briefing (deterministic); whether the model then
    # also calls a history tool is its own choice, which varies with the traces' timing under load.
    briefing = next(s["text"] for s in second if s["operation_name"] == "briefing")
    assert "Earlier candidates of this experiment" in briefing and "Call history first" in briefing, briefing[-800:]
    assert written[0].candidate_id.rsplit("/", 1)[-1] in briefing.split("Earlier candidates of this experiment", 1)[1]
    assert notes, "the notebook has no entry"
    assert all(c.prediction_check is not None or c.status == "invalid" for c in written)
