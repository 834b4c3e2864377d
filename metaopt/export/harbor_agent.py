"""`--format harbor`: a Harbor agent (`harbor run --agent-import-path PKG.harbor_agent:HarnessHarborAgent`)
running the harness's own loop (files/harbor_agent.py) against Harbor's environment and model."""

from __future__ import annotations

from pathlib import Path

from metaopt.export import write_package
from metaopt.export.source import Source

INIT = '''"""The exported harness {name!r} as a Harbor agent (see README.md). Import
`{{package}}.harbor_agent` inside Harbor (it needs the harbor package)."""
'''

USAGE = """
A Harbor agent running this harness's loop, prompts, tools and routing: the model is Harbor's
`-m PROVIDER/MODEL` (anthropic/, openai/ or openai-compatible/; keys from ANTHROPIC_API_KEY /
OPENAI_API_KEY, the server from OPENAI_BASE_URL or `--ak api_base=URL`), shell and python tools
run in the trial's environment. It writes an ATIF trajectory (`/logs/agent/trajectory.json`)
and reports token counts to Harbor. Install it next to Harbor (Python 3.12+):

```bash
pip install 'harbor==0.25.0' ./{out}
harbor run -d terminal-bench@2.0 --agent-import-path {package}.harbor_agent:HarnessHarborAgent \\
    -m anthropic/claude-sonnet-4-5 -o jobs --job-name {package}
```

Leaderboard (Terminal-Bench 2.x accepts only Harbor runs): run the dataset with this agent as
above (`-k 5` attempts, no timeout or resource overrides), then `harbor upload jobs/{package}` and
`harbor leaderboard submit` for the job. `metaopt import harbor jobs/{package}` reads the same job
back into a metaopt store to diagnose it or to start `metaopt run --baseline-from` from it.
"""


def write(src: Source, out: Path, package: str | None) -> None:
    assert package
    pkg = write_package(src, out, package, fmt="harbor",
                        files=("harness_runtime.py", "harness_agent.py", "harness_models.py", "harbor_agent.py"),
                        init=INIT.replace("{{package}}", package), title="`{package}`: harness `{name}` as a Harbor agent",
                        usage=USAGE, purpose=" as a Harbor agent", dependencies=("harbor==0.25.0", "openai>=1.50"),
                        optional={"anthropic": ["anthropic>=0.40"]})
    assert pkg.is_dir()
