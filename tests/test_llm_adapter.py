"""The adapter between what a model's tool calls look like and what the meta-agent's tools take
(meta_agent.proposers.llm_adapter), through its public functions: pure, no store, no model. The
shapes are the ones the local 1.5B wrote in meta-bench runs."""

from __future__ import annotations

import pytest

from metaopt.core.errors import ToolError
from metaopt.meta_agent.proposers.llm_adapter import adapt, claims, suggested_numbers
from metaopt.task_agent.messages import ToolCallPart


class Tools:
    def read_trial(self, trial_id: str, offset: int = 0, limit: int | None = None) -> str:
        return f"{trial_id} {offset} {limit}"

    def set_tool(self, name: str, **fields: object) -> str:
        return f"{name} {sorted(fields)}"


TOOLS = {"read_trial": Tools().read_trial, "set_tool": Tools().set_tool}


def call(name: str, arguments: dict | None = None, error: str | None = None) -> ToolCallPart:
    return ToolCallPart(id="c1", name=name, arguments=arguments or {}, arguments_error=error)


def test_a_well_formed_call_passes_unchanged():
    a = adapt(call("read_trial", {"trial_id": "t-1", "offset": 10}), TOOLS)
    assert a.arguments == {"trial_id": "t-1", "offset": 10} and a.ignored == [] and a.note == ""
    assert a.tool(**a.arguments) == "t-1 10 None"


def test_arguments_a_tool_does_not_take_are_dropped_and_named():
    a = adapt(call("read_trial", {"trial_id": "t-1", "reason": "look", "harness": "x"}), TOOLS)
    assert a.arguments == {"trial_id": "t-1"} and a.ignored == ["harness", "reason"]
    assert a.note == "\n[ignored unknown argument(s): harness, reason]"


def test_a_tool_that_takes_any_keyword_keeps_every_argument():
    a = adapt(call("set_tool", {"name": "grep", "template": "grep {p}", "timeout_s": 5}), TOOLS)
    assert a.arguments == {"name": "grep", "template": "grep {p}", "timeout_s": 5} and a.ignored == []


@pytest.mark.parametrize(("bad", "why"), [
    (call("read_trial", error="Expecting value: '{trial_id: t-1'"), "arguments are not a JSON object: Expecting"),
    (call("read_trail", {"trial_id": "t-1"}), "unknown tool 'read_trail' (tools: read_trial, set_tool)"),
])
def test_a_call_that_cannot_run_is_refused_with_the_reason(bad, why):
    with pytest.raises(ToolError, match=None) as e:
        adapt(bad, TOOLS)
    assert str(e.value).startswith(why)


def test_arguments_that_are_no_json_object_are_refused_before_the_tool_name_is_checked():
    with pytest.raises(ToolError, match="not a JSON object"):
        adapt(call("nosuch", error="not an object"), TOOLS)


KNOWN = {"sum-by-region", "due-dates", "line-totals"}


def test_set_field_calls_written_into_the_claims_become_edits_and_leave_the_lists():
    c = claims(["set_field(path='tools.bash.timeout_s', value=1.0)", "sum-by-region"], ["due-dates"],
               ["cause", "rationale"], KNOWN, edited=False)
    assert c.edits == [("tools.bash.timeout_s", 1.0)]
    assert (c.fixes, c.keeps) == (["sum-by-region"], ["due-dates"])


def test_a_call_written_into_the_cause_is_made_only_when_nothing_else_edits():
    texts = ["raise it: set_field(path=\"routing.limits.max_turns\", value=40)", "turn limit"]
    assert claims([], [], texts, KNOWN, edited=False).edits == [("routing.limits.max_turns", 40)]
    assert claims([], [], texts, KNOWN, edited=True).edits == []
    in_list = claims(["set_field(path='tools.bash.timeout_s', value=2)"], [], texts, KNOWN, edited=False)
    assert in_list.edits == [("tools.bash.timeout_s", 2)]  # the lists' calls win over the text's


def test_a_pasted_briefing_line_reads_as_the_one_known_task_it_names():
    line = "- task sum-by-region: status failed, failure_mode -, score 0.00 (trial r/sum-by-region/0)"
    c = claims([line, " due-dates ", "due-dates"], ["line-totals or due-dates", "unknown-task"], [], KNOWN, edited=True)
    assert c.fixes == ["sum-by-region", "due-dates"]  # stripped, repeats dropped
    assert c.keeps == ["line-totals or due-dates", "unknown-task"]  # two known ids, or none: left for the tool to judge


def test_values_of_the_wrong_type_are_left_for_the_tool_to_refuse():
    c = claims("sum-by-region", None, [None], KNOWN, edited=False)
    assert (c.fixes, c.keeps, c.edits) == ("sum-by-region", None, [])
    mixed = claims(["sum-by-region", 3], [], [], KNOWN, edited=True)
    assert mixed.fixes == ["sum-by-region", 3]


@pytest.mark.parametrize(("given", "read"), [
    ([1, 2], [1, 2]), (2, [2]), ("1", [1]), (["1", 3], [1, 3]), ([" 2 "], [2]), (None, []), ([], []),
    (["one"], ["one"]), ({"n": 1}, {"n": 1}),  # not numbers: left for write_revision to refuse
])
def test_suggested_numbers_read_one_number_and_quoted_digits(given, read):
    assert suggested_numbers(given) == read
