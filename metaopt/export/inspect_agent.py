"""`--format inspect`: an inspect-ai `@agent` that runs the harness's own loop (files/inspect_bridge.py)
against inspect's model and sandbox."""

from __future__ import annotations

from pathlib import Path

from metaopt.export import write_package
from metaopt.export.source import Source

INIT = '''"""The exported harness {name!r} as an inspect-ai agent (see README.md)."""

from .inspect_bridge import harness_agent

__all__ = ["harness_agent"]
'''

USAGE = """
An inspect-ai agent running this harness's loop, prompts, tools and routing: the model is the
eval's model (keys from the environment, as inspect reads them), shell and python tools run in
the sample's sandbox. `pip install ./{out}`, then:

```python
from inspect_ai import Task, eval
from inspect_ai.agent import as_solver
from {package} import harness_agent

eval(Task(dataset=..., solver=as_solver(harness_agent()), sandbox="docker", scorer=...), model="anthropic/claude-sonnet-4-5")
```

The last message of the sample is the task instruction; afterwards the sample's messages are the
harness's transcript and the output is the finish tool's summary.
"""


def write(src: Source, out: Path, package: str | None) -> None:
    assert package
    write_package(src, out, package, fmt="inspect",
                  files=("harness_runtime.py", "harness_agent.py", "inspect_bridge.py"), init=INIT,
                  title="`{package}`: harness `{name}` as an inspect-ai agent", usage=USAGE,
                  purpose=" as an inspect-ai agent", dependencies=("inspect-ai>=0.3.100",))
