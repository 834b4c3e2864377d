"""No import circles in metaopt/, counting every import (module level, under TYPE_CHECKING, inside
functions), and one keep/reject decision walks at most 20 files (perf.decision_walk)."""

from __future__ import annotations

from perf.decision_walk import circles, graph, walk


def test_no_module_of_the_package_imports_itself_round_a_circle():
    found = circles()
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_check_names_a_circle_through_type_only_and_lazy_imports():
    g = graph()
    assert "metaopt.meta_agent.judge" in g and "metaopt.meta_agent.gate" in g["metaopt.meta_agent.judge"]
    g = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert circles(g) == [["a", "b", "c", "a"], ["e", "e2", "e"]]


def test_one_decision_walks_at_most_20_files_its_type_only_imports_included():
    files = walk("metaopt.meta_agent.judge")
    assert len(files) <= 20, files
    assert "metaopt.meta_agent.evaluator" not in files and not any(f.startswith("metaopt.evaluation") for f in files)
