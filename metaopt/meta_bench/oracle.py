"""`oracle`: the scripted upper bound. It reads the case's manifest, not the traces, and proposes
its reference fix (the same structured edits the meta-agent's edit tools make). A case whose
oracle does not fix it on replay is a broken case, not a hard one."""

from __future__ import annotations

from metaopt.meta_agent.predictions import Manifest
from metaopt.meta_agent.proposers.base import Evidence, Revision
from metaopt.meta_bench.case import Case, apply_edits
from metaopt.task_agent.harness import Harness


class OracleProposer:
    name = "oracle"

    def __init__(self, case: Case):
        self.case = case

    def propose(self, parent: Harness, evidence: Evidence, tried: set[str]) -> Revision | None:
        m = self.case.manifest
        child = apply_edits(parent, m.fix)
        return Revision(child, f"oracle: the manifest's reference fix for {m.cause}",
                        manifest=Manifest(cause=m.cause, fixes=sorted(m.affected)))
