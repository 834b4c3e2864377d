"""How tests/data/store-0.1.0-5f0e0a2.duckdb.gz was made: with the release before the import rename
(its modules are top-level: meta_agent, traces, ...), one optimizer experiment (heuristic,
fake/solution) on LocalSandbox step tasks run to the end, then one eval run. As root:

    git worktree add /tmp/old 5f0e0a2 && cd /tmp/old
    PYTHONPATH=$PWD python3 /path/to/tests/data/make_old_store.py OUT.duckdb && gzip -9 OUT.duckdb
"""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, "tests")
from _local_tasks import step_tasks
from evaluation import HarnessAgent, run_eval
from meta_agent.config import RunConfig
from meta_agent.experiment import plan_experiment, start_experiment
from sandbox.local import LocalBackend
from task_agent.harness_io import load_harness, resolve_harness
from traces.store import Store
from traces.tracing import Tracing

out = Path(sys.argv[1])
tmp = Path(tempfile.mkdtemp())
backend = LocalBackend(tmp / "sandboxes")
tasks = step_tasks(tmp / "tasks")
with Store(out) as store:
    tracing = Tracing.for_store(store)
    cfg = RunConfig(benchmark="local-steps", model="fake/solution", meta_model="heuristic", trials=1,
                    split=(0.34, 0.33, 0.33), max_iterations=2, concurrency=2)
    exp = start_experiment(plan_experiment(cfg, "minimal", tasks), store=store, backend=backend, tracing=tracing,
                           experiment_id="exp-old-release")
    print(exp.run())
    agent = HarnessAgent(load_harness(resolve_harness("baseline")), "fake/solution", tracing=tracing)
    r = run_eval(tasks[:2], agent, benchmark="local-steps", backend=backend, store=store, run_id="run-old-release")
    print(r.mean_score)
    tracing.shutdown()
backend.prune()
