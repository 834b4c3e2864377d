"""The pure task-order helpers of selection (meta_agent.sequential): which tasks each look takes.

    selection_order(label, tasks, rule, parent) the order a candidate's selection takes the tasks
    selection_plan(tasks, k, looks, min_share)  (tasks, rounds) at each selection look
    interleave(items, flagged)                  the flagged items spread through the rest in proportion
    always_passed(trials)                       every scored trial passed (a child can only lose there)
"""

from __future__ import annotations

import math
from typing import Protocol

from metaopt.meta_agent.error_control import seed_for
from metaopt.meta_agent.gate import Scores, _scored


class OrderRule(Protocol):
    """What of the staged gate's rule (sequential.SequentialRule) the order reads."""

    @property
    def shuffle_tasks(self) -> bool: ...
    @property
    def stratify(self) -> bool: ...


def selection_order(label: str, tasks: list[str], rule: OrderRule, parent: Scores | None = None) -> list[str]:
    """The order in which a candidate's selection takes `tasks`: a draw seeded by its `label`
    (SequentialRule.draw_label: the same on a resume, and in any run with the same seed), or the
    order given when rule.shuffle_tasks is off. With rule.stratify and the parent's validation
    scores, the tasks the parent passed in every trial are spread through the draw in proportion
    (interleave): on 6 tasks of which the parent always passes 3, a plain draw put those 3 first
    for 1 candidate in 20, and its first look (gain 0 on 3/3 tasks) stopped it for futility."""
    if not rule.shuffle_tasks:
        return list(tasks)
    drawn = sorted(tasks, key=lambda t: seed_for(label, "select order", t))
    if not (rule.stratify and parent):
        return drawn
    return interleave(drawn, [always_passed(parent.get(t, [])) for t in drawn])


def selection_plan(tasks: list[str], k: int, looks: int = 5, min_share: int = 2) -> list[tuple[list[str], int]]:
    """(tasks, rounds) at each selection look: round 1 in parts = max(2, ceil(looks / K)) growing
    prefixes of the tasks (in the order given; those under `min_share` tasks skipped), then all
    tasks at rounds 2..K. The fewer the rounds, the finer round 1 is cut: with looks = 5, K = 3
    looks at half the tasks, then at rounds 1, 2, 3; K = 1, whose one round is all of selection,
    at each fifth of the tasks."""
    n, parts = len(tasks), max(2, math.ceil(looks / k))
    sizes = sorted({round(n * i / parts) for i in range(1, parts)} - {n})
    sizes = [m for m in sizes if m >= max(1, min_share)]
    return [(tasks[:m], 1) for m in sizes] + [(list(tasks), r) for r in range(1, k + 1)]


def always_passed(trials: list[float | None]) -> bool:
    scored = _scored(trials)
    return bool(scored) and min(scored) >= 1.0


def interleave(items: list, flagged: list[bool]) -> list:
    """`items` with the flagged ones spread in proportion, each group in its given order: the next
    item comes from the group furthest behind its share of the positions so far (the unflagged on
    a tie), so every prefix of m items holds round(m x share) of the flagged, give or take one."""
    rest = [x for x, f in zip(items, flagged) if not f]
    top = [x for x, f in zip(items, flagged) if f]
    n, out, i, j = len(items), [], 0, 0
    for pos in range(1, n + 1):
        if j < len(top) and (i == len(rest) or len(top) * pos - j * n > len(rest) * pos - i * n):
            out.append(top[j])
            j += 1
        else:
            out.append(rest[i])
            i += 1
    return out
