"""What the optimizer does with a revision's claim and its spans, between the gate's stages.

    screen_tasks(failing, manifest)             the screen runs the parent's failing train tasks
                                                plus the manifest's keeps (so they can be checked)
    judged(outcome_status, reason, live)        a candidate whose changes never ran is inconclusive
    claim(manifest, parent_train, child_train)  the manifest checked against the train results

A gain or a loss measured on trials in which the changed parts never ran is noise by
construction: such a candidate is `inconclusive` with that reason, whatever the screen or the
gate said (their rows keep their own outcome), and the history says so to the next proposal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metaopt.meta_agent.predictions import Manifest, PredictionCheck, check

if TYPE_CHECKING:
    from metaopt.meta_agent.gate import Scores
    from metaopt.meta_agent.outcomes import Liveness, Status


def screen_tasks(failing: list[str], manifest: Manifest | None) -> list[str]:
    keeps = [t for t in (manifest.keeps if manifest else []) if t not in failing]
    return [*failing, *keeps]


def judged(status: Status, reason: str, live: Liveness) -> tuple[Status, str]:
    """(status, reason) once liveness is known: never accepted or rejected on changes that did not run."""
    if live.live is False:
        return "inconclusive", f"inconclusive: not live: {live.reason} (the {live.split} result, '{status}', is noise)"
    return status, reason


def claim(manifest: Manifest | None, parent_train: Scores, child_train: Scores) -> PredictionCheck | None:
    return check(manifest, parent_train, child_train) if manifest else None
