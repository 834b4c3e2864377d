"""metaopt as a library, in one page: run the baseline harness on one sample task and read back
its score and trace. Offline: `fake/solution` replays the task's own solution as tool calls.

    python examples/hello_world.py [TASK_ID] [MODEL]

Needs Docker and the base image (`bash scripts/setup.sh`).
"""

import sys
import tempfile
from pathlib import Path

from metaopt.benchmarks.registry import load_benchmark
from metaopt.evaluation import HarnessAgent, run_eval
from metaopt.sandbox.docker import DockerBackend
from metaopt.sandbox.images import ImageMap
from metaopt.task_agent.harness_io import load_harness, resolve_harness
from metaopt.traces.queries import show_trial
from metaopt.traces.store import Store
from metaopt.traces.tracing import Tracing

task_id = sys.argv[1] if len(sys.argv) > 1 else "hello-greetings"
model = sys.argv[2] if len(sys.argv) > 2 else "fake/solution"

tasks = load_benchmark("terminalbench-sample", task_ids=[task_id])  # Task records
store = Store(Path(tempfile.mkdtemp()) / "hello.duckdb")             # one DuckDB file
tracing = Tracing.for_store(store)                                    # OTel spans into it
agent = HarnessAgent(load_harness(resolve_harness("baseline")), model, tracing=tracing)
result = run_eval(tasks, agent, benchmark="terminalbench-sample", backend=DockerBackend(image_map=ImageMap.load()),
                  store=store)
tracing.shutdown()

trial = result.rows[0]                                                # a TrialResult
print(f"{trial.task_id}: {trial.status} (score {trial.score}), {trial.duration_s:.1f} s")
for step in show_trial(store, trial.trial_id)["transcript"]:
    if step["type"] == "tool":
        print(f"  {step['name']}({step['arguments']}) -> {(step['result'] or '').strip()[:70]!r}")
store.close()
