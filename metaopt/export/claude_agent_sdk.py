"""`--format claude-agent-sdk`: the harness on the Claude Agent SDK (files/claude_agent_app.py)."""

from __future__ import annotations

from pathlib import Path

from metaopt.export import write_package
from metaopt.export.source import Source

INIT = '''"""The exported harness {name!r} on the Claude Agent SDK (see README.md)."""

from .harness_runtime import Executor, LocalExecutor, Result
from .claude_agent_app import build_options, run, run_async

__all__ = ["Executor", "LocalExecutor", "Result", "build_options", "run", "run_async"]
'''

USAGE = """
The harness as Claude Agent SDK code and configuration: `build_options(executor)` returns the
`ClaudeAgentOptions` (system prompt, the harness's tools as an in-process MCP server, turn limit,
model knobs, subagents, a hook that ends the session on finish); Claude Code's built-in tools are
off. Shell commands run through an executor you supply (see `harness_runtime.Executor`;
`LocalExecutor` runs them on this machine). Claude Code reads ANTHROPIC_API_KEY from the
environment; none is stored here. `pip install ./{out}` (the SDK bundles the Claude Code CLI), then:

```python
from {package} import LocalExecutor, run

state, messages = run("Fix the failing test.", LocalExecutor("/path/to/repo"), cwd="/path/to/repo")
print(state.finished, state.summary)
```
"""


def write(src: Source, out: Path, package: str | None) -> None:
    assert package
    write_package(src, out, package, fmt="claude-agent-sdk",
                  files=("harness_runtime.py", "harness_agent.py", "claude_agent_app.py"), init=INIT,
                  title="`{package}`: harness `{name}` on the Claude Agent SDK", usage=USAGE,
                  purpose=" for the Claude Agent SDK", dependencies=("claude-agent-sdk>=0.1",))
