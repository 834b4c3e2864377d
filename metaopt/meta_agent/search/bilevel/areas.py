"""What a revision changed, in the protocol's words: change *kinds* (the changed fields, e.g.
`routing.limits.max_turns`, `tools.bash.timeout_s`, `prompts.system`, `tools.grep` for a tool
added or removed) and the *areas* they fall in (prompts, tools, routing, limits; model)."""

from __future__ import annotations

from typing import Any

from metaopt.task_agent.harness import Harness

LIMIT_FIELDS = {"timeout_s", "output_limit", "max_turns"}


def changes(parent: Harness, child: Harness) -> tuple[list[str], list[str]]:
    """(areas, kinds) that `child` changed against `parent`, each sorted and unique."""
    a, b = parent.model_dump(mode="json"), child.model_dump(mode="json")
    kinds: set[str] = set()
    for key in ("system", "task_template"):
        if a["prompts"][key] != b["prompts"][key]:
            kinds.add(f"prompts.{key}")
    kinds |= {f"prompts.roles.{r}" for r in _diff_keys(a["prompts"]["roles"], b["prompts"]["roles"])}
    ta, tb = {t["name"]: t for t in a["tools"]}, {t["name"]: t for t in b["tools"]}
    for name in sorted(set(ta) | set(tb)):
        if name not in ta or name not in tb:
            kinds.add(f"tools.{name}")
        else:
            kinds |= {f"tools.{name}.{f}" for f in _diff_keys(ta[name], tb[name])}
    ra, rb = a["routing"], b["routing"]
    kinds |= {f"routing.limits.{f}" for f in _diff_keys(ra["limits"], rb["limits"])}
    for role in _diff_keys(ra["roles"], rb["roles"]):
        old, new = ra["roles"].get(role), rb["roles"].get(role)
        if old is None or new is None:
            kinds.add(f"routing.roles.{role}")
        else:
            kinds |= {f"routing.roles.{role}.{f}" for f in _diff_keys(old, new)}
    kinds |= {f"routing.{f}" for f in ("start_role", "verification", "context") if ra[f] != rb[f]}
    kinds |= {f"model.{f}" for f in _diff_keys(a["model"], b["model"])}
    return sorted({area_of(k) for k in kinds}), sorted(kinds)


def area_of(kind: str) -> str:
    head, _, _rest = kind.partition(".")
    if head == "model":
        return "model"
    if kind.startswith("routing.roles.") and kind.endswith(".prompt"):
        return "prompts"
    if kind.rsplit(".", 1)[-1] in LIMIT_FIELDS or kind.startswith("routing.limits."):
        return "limits"
    if head in ("prompts", "tools"):
        return head
    return "routing"


def _diff_keys(x: dict[str, Any], y: dict[str, Any]) -> list[str]:
    return sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
