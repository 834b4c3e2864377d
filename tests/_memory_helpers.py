"""Store fixtures for the memory tests: traced episodes made by the real tracing path (as the task
agent emits them) around a scripted fake model, and their trials rows."""

from __future__ import annotations

from pathlib import Path

import yaml
from _local_tasks import step_tasks

from metaopt.evaluation import TrialResult
from metaopt.meta_agent.config import RunConfig
from metaopt.meta_agent.experiment import plan_experiment, start_experiment
from metaopt.meta_agent.proposers.edits import Draft
from metaopt.task_agent.harness import Harness
from metaopt.task_agent.harness_io import load_harness, resolve_harness
from metaopt.task_agent.messages import Message, ModelSettings, ToolResultPart
from metaopt.task_agent.models.fake import ScriptModel
from metaopt.traces.instrument import TracedModel, tool_span
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

MINIMAL = load_harness(resolve_harness("minimal"))
EXP = "exp-mem"


def episode(store: Store, tracing: Tracing, harness: Harness, trial_id: str, task_id: str, cid: str, split: str,
            calls: list[tuple[str, str, dict]], outcome: str, score: float) -> None:
    """One traced episode as the task agent emits it, and its trials row: `calls` are
    (tool, output, metaopt.tool extras) answered by a scripted model, one per turn."""
    model = TracedModel(ScriptModel([{"tool": t, "arguments": {"command": "x"}} for t, _, _ in calls] + [{"text": "done"}]),
                        tracing.tracer)
    messages = [Message.system(harness.system_prompt("main")), Message.user(harness.render_task("Do the task."))]
    with tracing.episode(agent_name=harness.name, harness_version=harness.content_hash()[:12], conversation_id=trial_id,
                         run_id=f"{cid}:{split}", trial_id=trial_id, task_id=task_id, provider="fake") as ep:
        for tool, output, extra in calls + [(None, "", {})]:
            resp = model.generate(messages, harness.tool_specs("main"), ModelSettings(model="fake/script"))
            messages.append(resp.message)
            if tool is None:
                break
            call = resp.message.tool_calls[0]
            with tool_span(tracing.tracer, call.name, call.id, call.arguments) as span:
                span.set_result(output, extra=extra)
            messages.append(Message(role="tool", parts=[ToolResultPart(id=call.id, response=output)]))
        ep.finish(None, outcome)
        trace_id = ep.trace_id
    store.insert(trial(trial_id, task_id, cid, split, score, trace_id=trace_id))


def trial(trial_id: str, task_id: str, cid: str, split: str, score: float | None, **more) -> TrialResult:
    return TrialResult(trial_id=trial_id, run_id=f"{cid}:{split}", benchmark="b", task_id=task_id, attempt=0,
                       agent="a", status="passed" if score == 1 else "failed", score=score, experiment_id=EXP,
                       candidate_id=cid, split=split, **more)


def edit(h: Harness, **fields) -> Harness:
    d = Draft(h)
    for path, value in fields.items():
        d.set_field(path.replace("__", "."), value)
    return Harness.model_validate(d.harness().model_dump(mode="json"))


def write(rationale: str, fixes: list[str], keeps: list[str], cause: str = "episodes hit the turn limit") -> dict:
    return {"tool": "write_revision", "arguments": {"rationale": rationale, "cause": cause, "fixes": fixes,
                                                    "keeps": keeps, "note": rationale}}


def scripted_experiment(tmp_path: Path, backend) -> tuple[Path, str, list[str], list[str], dict]:
    """Three scripted proposals from the same parent (see tests/test_memory_loop.py), run in process
    on LocalSandbox into tmp_path/s.duckdb: (db, experiment id, failing and passing train tasks, report)."""
    tasks = step_tasks(tmp_path / "tasks")
    cfg = RunConfig(benchmark="local-steps", model="fake/solution", trials=1, split=(0.34, 0.33, 0.33),
                    max_iterations=3, plateau=5, concurrency=2, meta_model="fake/script:" + str(tmp_path / "meta.yaml"))
    plan = plan_experiment(cfg.model_copy(update={"meta_model": "heuristic"}), "minimal", tasks)
    train = plan.splits["train"]
    failing = [t for t in train if int(t[-2:]) < 6]  # steps-00..05 need 12 steps; minimal has 8 turns
    passing = [t for t in train if t not in failing]
    assert failing, plan.splits
    (tmp_path / "meta.yaml").write_text(yaml.safe_dump([
        # proposal 1: a prompt line; it reaches the model but cannot beat the turn limit
        {"tool": "edit_prompt", "arguments": {"prompt": "system", "text": "Work step by step."}},
        write("ask for care", failing, passing),
        # proposal 2: reads its history, then adds a tool nobody will call
        {"tool": "history"},
        {"tool": "read_candidate", "arguments": {"candidate_id": "c1"}},
        {"tool": "set_tool", "arguments": {"name": "lint", "kind": "shell", "description": "Lint a file.",
                                           "template": "true"}},
        write("c1's prompt line was rejected: try a lint tool", failing, [], cause="no way to check files"),
        # proposal 3: the turn limit
        {"tool": "history"},
        {"tool": "set_field", "arguments": {"path": "routing.limits.max_turns", "value": 16}},
        write("c1 (prompt) rejected, c2 (tool) never ran: the turn limit is the cause", failing, passing),
    ], sort_keys=False))
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        tracing = Tracing.for_store(store)
        exp = start_experiment(plan_experiment(cfg, "minimal", tasks), store=store, backend=backend, tracing=tracing)
        out = exp.run()
        tracing.shutdown()
    return db, exp.id, failing, passing, out
