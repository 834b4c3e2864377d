"""What a model's tool calls look like, made into what the meta-agent's tools take.

    adapt(call, tools) -> Adapted(tool, arguments, ignored)        any call, before its tool runs
    claims(fixes, keeps, texts, known, edited) -> Claims(...)       write_revision's claim lists
    suggested_numbers(numbers) -> list                              write_revision's `suggested`

Small models (the compact profile's) write tool calls loosely. What this module does with them,
and what the model hears of it:

- arguments that are not a JSON object, or a tool that is not offered: refused (ToolError), the
  reason said, so the model can call again;
- arguments the tool does not take (small models add some): dropped, and the result says which
  (`Adapted.note`); a tool that takes any keyword (set_tool's fields) keeps them all;
- a set_field call written out as text into `fixes` or `keeps` (a suggested call copied into a
  claim instead of made): returned as an edit to make and dropped from the list; when no edit was
  made and no full harness given, one written into the cause or rationale is made the same way;
- a claim entry that is a pasted briefing line (`- task sum-by-region: status failed ...`): read
  as the one known train task id inside it; entries are stripped and repeats dropped;
- the numbers of suggested edits written as one number, or quoted ("1"): a list of numbers.

The functions are pure (no store, no draft) and never change what a well-formed call means:
values of the wrong type are left for the tool to refuse in its own words.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from metaopt.core.errors import ToolError
from metaopt.meta_agent.proposers.edits import written_calls
from metaopt.task_agent.messages import ToolCallPart


@dataclass(frozen=True)
class Adapted:
    """A call as its tool takes it."""

    tool: Callable[..., str]
    arguments: dict[str, Any]
    ignored: list[str] = field(default_factory=list)
    """Arguments the tool does not take, dropped (sorted)."""

    @property
    def note(self) -> str:
        """What to add to the tool's result: the dropped arguments, or ''."""
        return f"\n[ignored unknown argument(s): {', '.join(self.ignored)}]" if self.ignored else ""


@dataclass(frozen=True)
class Claims:
    """write_revision's claim lists, repaired, and the set_field edits written into its text."""

    fixes: Any
    keeps: Any
    edits: list[tuple[str, Any]]
    """(path, value) of each set_field call written as text, in order: make them before the revision."""


def adapt(call: ToolCallPart, tools: Mapping[str, Callable[..., str]]) -> Adapted:
    """`call` as the tool it names (one of `tools`, name -> bound method) takes it. Raises ToolError
    when its arguments are not a JSON object or the tool is not one of `tools`."""
    if call.arguments_error:
        raise ToolError(f"arguments are not a JSON object: {call.arguments_error}")
    if call.name not in tools:
        raise ToolError(f"unknown tool {call.name!r} (tools: {', '.join(tools)})")
    fn = tools[call.name]
    params = inspect.signature(fn).parameters
    args, ignored = dict(call.arguments), []
    if not any(v.kind is inspect.Parameter.VAR_KEYWORD for v in params.values()):
        ignored = sorted(set(args) - set(params))
        args = {k: v for k, v in args.items() if k in params}
    return Adapted(fn, args, ignored)


def claims(fixes: Any, keeps: Any, texts: list[Any], known: Collection[str], edited: bool) -> Claims:
    """The task lists `fixes` and `keeps` with written set_field calls taken out and pasted lines
    read as the known task id (`known`: the train task ids a claim may name) they hold, plus the
    edits to make: those written into the lists, or, when there are none and nothing else edits
    the harness (`edited` False: no edit made, no full harness given), those written into `texts`
    (the cause and the rationale)."""
    lists = [x for x in (fixes, keeps) if isinstance(x, list)]
    edits = written_calls([t for x in lists for t in x])
    if not edits and not edited:
        edits = written_calls(texts)
    return Claims(_tasks(fixes, known), _tasks(keeps, known), edits)


def _tasks(given: Any, known: Collection[str]) -> Any:
    if not isinstance(given, list):
        return given
    given = [t for t in given if not written_calls([t])]
    if not all(isinstance(t, str) for t in given):
        return given
    out = []
    for t in given:
        t = t.strip()
        found = [k for k in known if re.search(rf"(?<![\w.-]){re.escape(k)}(?![\w.-])", t)]
        out.append(t if t in known or len(found) != 1 else found[0])
    return list(dict.fromkeys(out))


def suggested_numbers(numbers: Any) -> Any:
    """write_revision's `suggested` as a list: one number (or string) as a list of one, quoted digits
    as numbers (small models quote them), None and other falsy values as []; anything else as given."""
    numbers = [numbers] if isinstance(numbers, (int, str)) else numbers or []
    if isinstance(numbers, list):
        numbers = [int(n) if isinstance(n, str) and n.strip().isdigit() else n for n in numbers]
    return numbers
