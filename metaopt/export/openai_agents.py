"""`--format openai-agents`: the harness on the OpenAI Agents SDK (files/openai_agents_app.py)."""

from __future__ import annotations

from pathlib import Path

from metaopt.export import write_package
from metaopt.export.source import Source

INIT = '''"""The exported harness {name!r} on the OpenAI Agents SDK (see README.md)."""

from .harness_runtime import Executor, LocalExecutor, Result
from .openai_agents_app import build_agent, run, run_async

__all__ = ["Executor", "LocalExecutor", "Result", "build_agent", "run", "run_async"]
'''

USAGE = """
The harness as OpenAI Agents SDK code: one `Agent` per role, the harness's tools as
`FunctionTool`s that run shell commands through an executor you supply (see
`harness_runtime.Executor`; `LocalExecutor` runs them on this machine). The key comes from
OPENAI_API_KEY; none is stored here. `pip install ./{out}`, then:

```python
from {package} import LocalExecutor, build_agent, run

outcome = run("Fix the failing test.", LocalExecutor("/path/to/repo"))  # or model=OpenAIChatCompletionsModel(...)
print(outcome.outcome, outcome.summary)
agent = build_agent(LocalExecutor("/path/to/repo"))  # to use with Runner yourself (max_turns: see run_async)
```
"""


def write(src: Source, out: Path, package: str | None) -> None:
    assert package
    write_package(src, out, package, fmt="openai-agents",
                  files=("harness_runtime.py", "harness_agent.py", "openai_agents_app.py"), init=INIT,
                  title="`{package}`: harness `{name}` on the OpenAI Agents SDK", usage=USAGE,
                  purpose=" for the OpenAI Agents SDK", dependencies=("openai-agents>=0.2",))
