"""inspect-ai tasks as metaopt benchmarks: `--benchmark inspect:<module>@<task>`.

Each sample runs as one trial with our harness agent in our Docker sandbox, traced like any other,
and is scored by the inspect task's own scorers against the live container (sandbox/inspect_env.py
is our sandbox as an inspect sandbox environment). inspect-ai is imported only when these
functions run: it is large and slow to import.
"""

from metaopt.benchmarks.inspect_bridge.loader import InspectLoadError, load_tasks
from metaopt.benchmarks.inspect_bridge.scoring import score_inspect

__all__ = ["InspectLoadError", "load_tasks", "score_inspect"]
