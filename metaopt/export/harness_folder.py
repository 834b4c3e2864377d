"""`--format harness`: the harness folder itself (canonical layout) plus a README of its origin."""

from __future__ import annotations

from pathlib import Path

from metaopt.export import readme
from metaopt.export.source import Source

USAGE = """
This is a metaopt harness folder (`harness.yaml` + `prompts/*.md`). Run it with metaopt:

    metaopt eval --benchmark BENCHMARK --harness {out} --model PROVIDER/MODEL

or load it in Python with `task_agent.harness_io.load_harness("{out}")`.
"""


def write(src: Source, out: Path, package: str | None) -> None:
    src.harness.save(out)
    (out / "README.md").write_text(readme(src, "harness", f"Harness `{src.harness.name}`",
                                          USAGE.format(out=out.name)), encoding="utf-8")
