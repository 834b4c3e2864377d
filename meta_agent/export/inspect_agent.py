"""`--format inspect`: an inspect-ai `@agent` that runs the harness's own loop (files/inspect_bridge.py)
against inspect's model and sandbox."""

from __future__ import annotations

from pathlib import Path

from meta_agent.export import copy_runtime, readme, write_harness_json
from meta_agent.export.source import Source

INIT = '''"""The exported harness {name!r} as an inspect-ai agent (see README.md)."""

from .inspect_bridge import harness_agent

__all__ = ["harness_agent"]
'''

PYPROJECT = '''[project]
name = "{dist}"
version = "0.1.0"
description = "Harness {name!r} exported by metaopt as an inspect-ai agent"
requires-python = ">=3.10"
dependencies = ["inspect-ai>=0.3.100"]

[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[tool.setuptools.package-data]
{package} = ["harness.json"]
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
    pkg = out / package
    copy_runtime(pkg, "harness_runtime.py", "harness_agent.py", "inspect_bridge.py")
    write_harness_json(src, pkg)
    name = src.harness.name
    (pkg / "__init__.py").write_text(INIT.format(name=name), encoding="utf-8")
    (out / "pyproject.toml").write_text(PYPROJECT.format(dist=package.replace("_", "-"), name=name, package=package),
                                        encoding="utf-8")
    (out / "README.md").write_text(readme(src, "inspect", f"`{package}`: harness `{name}` as an inspect-ai agent",
                                          USAGE.format(out=out.name, package=package)), encoding="utf-8")
