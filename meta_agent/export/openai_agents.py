"""`--format openai-agents`: the harness on the OpenAI Agents SDK (files/openai_agents_app.py)."""

from __future__ import annotations

from pathlib import Path

from meta_agent.export import copy_runtime, readme, write_harness_json
from meta_agent.export.source import Source

INIT = '''"""The exported harness {name!r} on the OpenAI Agents SDK (see README.md)."""

from .harness_runtime import Executor, LocalExecutor, Result
from .openai_agents_app import build_agent, run, run_async

__all__ = ["Executor", "LocalExecutor", "Result", "build_agent", "run", "run_async"]
'''

PYPROJECT = '''[project]
name = "{dist}"
version = "0.1.0"
description = "Harness {name!r} exported by metaopt for the OpenAI Agents SDK"
requires-python = ">=3.10"
dependencies = ["openai-agents>=0.2"]

[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[tool.setuptools.package-data]
{package} = ["harness.json"]
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
    pkg = out / package
    copy_runtime(pkg, "harness_runtime.py", "harness_agent.py", "openai_agents_app.py")
    write_harness_json(src, pkg)
    name = src.harness.name
    (pkg / "__init__.py").write_text(INIT.format(name=name), encoding="utf-8")
    (out / "pyproject.toml").write_text(PYPROJECT.format(dist=package.replace("_", "-"), name=name, package=package),
                                        encoding="utf-8")
    (out / "README.md").write_text(readme(src, "openai-agents", f"`{package}`: harness `{name}` on the OpenAI Agents SDK",
                                          USAGE.format(out=out.name, package=package)), encoding="utf-8")
