"""Tamper detection from outside the container: did the agent change what the verifier will
execute or import?

`scan(sb, scope)` takes `docker diff` (every path the agent's container added, changed or
deleted against its image), reads the paths that matter through the Docker API, hashes them on
the host and compares them with the image's pristine copy. The rules (sandbox.tamper_rules)
name what a verifier runs: the interpreters and tools on its PATH, Python's startup hooks and
the test runner's packages, pytest configuration outside the task's project, the loader's
preload and libraries, installer and git hooks, the verifier's own directories, and code that
references the verifier's internals. Each hit is an `Evidence` (rule, path, change, hashes,
detail); `neutralize` lists what the runner deletes before the verifier without judging it
(compiled bytecode and installer caches, which Python and uv would otherwise trust). What a rule
sees (`Ctx`) and what it finds (`Evidence`) are in sandbox.tamper_ctx, below the rules.

Legitimate installs are not tampering: new files on PATH that shadow nothing, pip and uv console
scripts, packages whose files match their RECORD or the dpkg database, test-runner packages whose
files match a wheel the image ships. See README "How a trial runs and is scored".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from metaopt.core.errors import ScanExhausted
from metaopt.sandbox import forensics as fx
from metaopt.sandbox.tamper_content import ALL
from metaopt.sandbox.tamper_ctx import Ctx, Evidence, Scope
from metaopt.sandbox.tamper_rules import neutralize_paths

if TYPE_CHECKING:
    from metaopt.sandbox.docker_sandbox import DockerSandbox

__all__ = ["MAX_EVIDENCE", "Ctx", "Evidence", "ScanResult", "Scope", "scan"]  # Ctx, Evidence, Scope: sandbox.tamper_ctx

MAX_EVIDENCE = 50  # rows kept in a trial's evidence (the count is kept too)
EVIDENCE_CAP = 500  # findings after which the scan stops looking (the trial is tampered already)
SCAN_BUDGET_S = 180.0
"""Wall time the scan may take. Its reads are bounded per rule, but an agent chooses how many
files it changes: past the budget the scan stops and the trial is `tampered` (`scan-exhausted`);
no honest trial comes near it (median ~1-2 s, the largest sample ~10 s)."""


@dataclass
class ScanResult:
    evidence: list[Evidence] = field(default_factory=list)
    neutralize: list[str] = field(default_factory=list)
    n_changes: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        rules = sorted({e.rule for e in self.evidence})
        first = self.evidence[0] if self.evidence else None
        return (f"tampered: {', '.join(rules)}" + (f" ({first.path}: {first.detail})" if first else ""))[:500]


def scan(sb: DockerSandbox, scope: Scope, pristine: fx.Pristine | None = None,
         changes: list[tuple[str, str]] | None = None) -> ScanResult:
    """Judge the container's changes (see the module docstring): `changes` (docker diff rows)
    default to `sb`'s own; the verifier's fresh container passes those its source had at the
    capture, and the pristine view of that source's image. Raises SandboxError only when the
    daemon cannot answer."""
    t0 = time.monotonic()
    pristine = pristine or fx.Pristine.of(sb)
    ctx = Ctx(sb, scope, pristine, fx.changes(sb) if changes is None else changes, budget_s=SCAN_BUDGET_S)
    found: list[Evidence] = []
    seen: set[tuple[str, str]] = set()
    try:
        for rule in ALL:
            for ev in rule(ctx):
                if (ev.rule, ev.path) not in seen:
                    seen.add((ev.rule, ev.path))
                    found.append(ev)
                if len(found) >= EVIDENCE_CAP:
                    break
            if len(found) >= EVIDENCE_CAP:
                break
    except ScanExhausted:
        found.append(Evidence("scan-exhausted", "(the scan)", "runtime", f"the agent's {len(ctx.changes)} changed paths "
                              f"took the tamper scan past its {SCAN_BUDGET_S:.0f} s budget (at rule {rule.__name__})"))
    return ScanResult(evidence=found, neutralize=neutralize_paths(ctx), n_changes=len(ctx.changes),
                      seconds=time.monotonic() - t0)
