"""The mechanism protocol: how the bilevel outer loop changes the inner loop's search without
editing it. One module is one whole mechanism: a class named `Mechanism` whose methods the loop
calls at fixed hooks. Built-in mechanisms (tabu.py, bandit.py, explore.py beside this file) and
generated ones are written the same way.

    class Mechanism:
        name = "my_mechanism"                              # required: [a-z][a-z0-9_]{2,40}

        def on_result(self, candidate, decision, ctx):     # required; returns None
        def guidance(self, ctx):                           # required; str (<= 2000 chars) or None
        def select_parent(self, candidates, rng):          # optional; a candidate id or None
        def filter(self, revision, ctx):                   # optional; True/None = keep, str = drop (why)
        def state_dict(self):                              # required; a JSON-able dict (<= 64 KB)
        def load_state_dict(self, state):                  # required; returns None

When the loop calls them, in every iteration:
1. `select_parent(candidates, rng)` when the loop picks the parent to extend. `candidates` are
   the possible parents (baseline and accepted candidates; the strategy's own pick has
   "default": true); return the id of another one to override the strategy, or None. `rng` is a
   seeded random.Random (reproducible); use it, not the random module's global functions.
2. `guidance(ctx)` before the proposer runs: the text is added to the proposer's prompt (a model
   proposer sees it; the heuristic proposer takes no text: ctx["proposer"]["takes_guidance"]).
3. `filter(revision, ctx)` after the proposer returned a revision, before any trial is spent:
   a string drops the revision (it is recorded as invalid with that reason).
4. `on_result(candidate, decision, ctx)` once the candidate's final decision is known.
`state_dict()` is saved after every on_result (resume, judgement) and `load_state_dict` must
restore exactly that state: state_dict() after load_state_dict(s) must equal s.

Data (plain JSON: dicts, lists, str, int, float, bool, None; never live objects):

candidate: {"id": str, "parent_id": str | None, "iteration": int, "status": "baseline" |
    "accepted" | "rejected" | "inconclusive" | "invalid", "reason": str | None, "proposer":
    str | None, "areas": [area, ...], "kinds": [change kind, ...], "rationale": str (cut to 500
    chars), "val_mean": float | None, "val_delta": float | None (its validation gain over its
    parent: for an accepted candidate the gate's bias-adjusted estimate from fresh confirmation
    trials, else the last look's difference; None when it was not validated), "trials": int
    (trials it cost), "children": int}
decision: {"stage": "guard" | "smoke" | "screen" | "validation" | "filter", "outcome": "pass" |
    "fail" | "accept" | "reject" | "inconclusive" | "drop", "reason": str, "delta": float | None,
    "se": float | None}
revision: {"parent_id": str, "rationale": str, "areas": [...], "kinds": [...], "diff": str
    (unified diff against the parent, cut to 4000 chars)}
ctx: {"iteration": int, "max_iterations": int, "trials_spent": int, "incumbent": str,
    "proposer": {"name": str, "takes_guidance": bool, "areas": [area, ...] (what it can change)},
    "search": {"favour": [area, ...], "freeze": [area, ...], "explore_rate": float},
    "history": [candidate, ...] (every earlier candidate, oldest first)}
areas: "prompts" (system / role prompts, task template), "tools" (tool definitions added,
    removed or rewritten), "routing" (roles, verification, context management), "limits" (turn
    and time limits, tool timeouts and output limits); "model" only with --allow-model-changes.
kinds: the changed fields, e.g. "routing.limits.max_turns", "tools.bash.timeout_s",
    "prompts.system", "tools.grep" (a tool added or removed).

Rules, checked before a generated module runs and enforced while it runs:
- imports: only the modules in ALLOWED_IMPORTS (standard library, pure computation). No files,
  network, processes, clocks or introspection: open, exec, eval, compile, __import__, globals,
  vars, getattr/setattr/delattr, input and attributes named __like_this__ are refused.
- every function and method the module defines must be called through the hooks (a helper
  class nothing calls is dead code and is refused), and at least one hook's output must reach
  the proposer or change a selection.
- each call must return within the time limit (a few seconds) and within the memory limit.
- a hook that raises, times out or returns something outside the shapes above switches the
  mechanism off for the rest of the run.
"""

from __future__ import annotations

import json
import re
from typing import Any

REQUIRED = ("on_result", "guidance", "state_dict", "load_state_dict")
OPTIONAL = ("select_parent", "filter")
HOOKS = ("select_parent", "guidance", "filter", "on_result", "state_dict", "load_state_dict")
AREAS = ("prompts", "tools", "routing", "limits")
NAME = re.compile(r"^[a-z][a-z0-9_]{2,40}$")

ALLOWED_IMPORTS = frozenset({
    "math", "random", "statistics", "collections", "itertools", "functools", "heapq", "bisect",
    "re", "json", "dataclasses", "typing", "enum", "string", "textwrap", "difflib", "hashlib",
    "operator", "copy", "fractions", "decimal", "numbers", "abc", "__future__",
})
FORBIDDEN_NAMES = frozenset({
    "open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "getattr",
    "setattr", "delattr", "input", "breakpoint", "help", "exit", "quit", "memoryview",
    "__builtins__", "__loader__", "__spec__",
})
DUNDERS_ALLOWED = frozenset({"__init__", "__name__", "__future__", "__annotations__"})

MAX_GUIDANCE = 2000
MAX_REASON = 500
MAX_STATE = 64_000


def check_output(hook: str, value: Any, offered: list[str] | None = None) -> str | None:
    """Why `value` is not a valid return of `hook` (None when it is). `offered`: the candidate ids
    select_parent was given."""
    if hook in ("on_result", "load_state_dict"):
        return None if value is None else f"{hook} must return None, got {_kind(value)}"
    if hook == "guidance":
        if value is None:
            return None
        if not isinstance(value, str):
            return f"guidance must return a string or None, got {_kind(value)}"
        if len(value) > MAX_GUIDANCE:
            return f"guidance returned {len(value)} characters (at most {MAX_GUIDANCE})"
        return None
    if hook == "select_parent":
        if value is None:
            return None
        if not isinstance(value, str) or value not in (offered or []):
            return f"select_parent must return one of the offered candidate ids or None, got {value!r:.80}"
        return None
    if hook == "filter":
        if value is None or value is True:
            return None
        if not isinstance(value, str) or not value.strip():
            return f"filter must return True/None (keep) or a non-empty reason string (drop), got {_kind(value)}"
        if len(value) > MAX_REASON:
            return f"filter's reason has {len(value)} characters (at most {MAX_REASON})"
        return None
    if hook == "state_dict":
        if not isinstance(value, dict):
            return f"state_dict must return a dict, got {_kind(value)}"
        size = len(json.dumps(value))
        return f"state_dict is {size} bytes as JSON (at most {MAX_STATE})" if size > MAX_STATE else None
    return f"unknown hook {hook!r}"


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.60}"
