"""metaopt as a library, in one page, through the public API alone: run the baseline harness on one
sample task, then read its score and the agent's tool calls back from the trace store.
Offline: `fake/solution` replays the task's own solution as tool calls.

    python examples/hello_world.py [TASK_ID] [MODEL]

Needs Docker and the base image (`bash scripts/setup.sh`).
"""

import sys
import tempfile
from pathlib import Path

import metaopt

task_id = sys.argv[1] if len(sys.argv) > 1 else "hello-greetings"
model = sys.argv[2] if len(sys.argv) > 2 else "fake/solution"

harness = metaopt.load_harness("baseline")                          # prompts, tools, limits
print(f"harness: tools {[t.name for t in harness.tools]}")
with metaopt.open_store(Path(tempfile.mkdtemp()) / "hello.duckdb") as store:  # one DuckDB file
    result = metaopt.evaluate("terminalbench-sample", model=model, harness="baseline",
                              tasks=[task_id], store=store)             # run, verify, score
    trial = result.rows[0]                                            # a TrialResult
    print(f"{trial.task_id}: {trial.status} (score {trial.score}), {trial.duration_s:.1f} s")
    parts = store.rows("SELECT s.tool_name, m.direction, m.text FROM spans s JOIN messages m USING (trace_id, span_id) "
                       "WHERE s.trial_id = ? AND s.operation_name = 'execute_tool' ORDER BY s.start_ns, m.idx",
                       [trial.trial_id])                                # OpenTelemetry spans, as rows
    for call, result in zip(parts[::2], parts[1::2]):
        print(f"  {call['tool_name']}({call['text']}) -> {(result['text'] or '').strip()[:60]!r}")
