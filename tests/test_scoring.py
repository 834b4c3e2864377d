"""The fixed scorers: TB1 pytest summaries, Harbor rewards, infrastructure errors."""

from metaopt.benchmarks.scoring import parse_pytest_summary, score_pytest, score_reward

SUMMARY = """
============================= test session starts ==============================
collected 3 items

../tests/test_outputs.py .F.                                             [100%]
=========================== short test summary info ============================
PASSED ../tests/test_outputs.py::test_exists
FAILED ../tests/test_outputs.py::test_content - AssertionError: assert 'a' == 'b'
SKIPPED [1] ../tests/test_outputs.py:9: no reason
PASSED ../tests/test_outputs.py::test_mode
========================= 1 failed, 2 passed in 0.02s ==========================
"""


def test_summary_lists_each_test():
    tests = parse_pytest_summary(SUMMARY)
    assert tests == {
        "../tests/test_outputs.py::test_exists": "passed",
        "../tests/test_outputs.py::test_content": "failed",
        "../tests/test_outputs.py:9": "passed",
        "../tests/test_outputs.py::test_mode": "passed",
    }


def test_one_failure_means_unresolved():
    v = score_pytest(SUMMARY)
    assert (v.score, v.status, v.failure_mode) == (0.0, "failed", "tests_failed")


def test_all_passed_is_resolved_and_xfail_counts_as_pass():
    text = "== short test summary info ==\nPASSED t.py::a\nXFAIL t.py::b - reason\n"
    v = score_pytest(text)
    assert (v.score, v.status) == (1.0, "passed")


def test_xpass_and_error_fail():
    assert score_pytest("== short test summary info ==\nPASSED t::a\nXPASS t::b\n").score == 0.0
    assert score_pytest("== short test summary info ==\nERROR t::a - boom\n").score == 0.0


def test_missing_summary_is_unresolved_as_terminal_bench_scores_it():
    v = score_pytest("collected 0 items\nSyntaxError: invalid syntax\n")
    assert (v.score, v.status, v.failure_mode) == (0.0, "failed", "no_test_summary")


def test_failed_download_is_infra_error():
    out = "curl: (6) Could not resolve host: astral.sh\nbash: line 3: uv: command not found\n"
    v = score_pytest(out)
    assert v.status == "error" and v.failure_mode == "infra_error" and "astral.sh" in v.error


def test_reward_txt_and_json_precedence():
    assert score_reward(None, b"1\n", "").score == 1.0
    assert score_reward(None, b"0", "== short test summary info ==\nFAILED t::a\n").status == "failed"
    v = score_reward(b'{"accuracy": 1.0, "style": 0.5}', b"0", "")
    assert v.score == 0.75 and v.rewards == {"accuracy": 1.0, "style": 0.5} and "reward.json" in v.error
    assert score_reward(b'{"reward": 0.25, "other": 1}', None, "").score == 0.25


def test_missing_or_bad_reward_is_an_error():
    v = score_reward(None, None, "")
    assert v.score is None and v.status == "error" and v.failure_mode == "reward_missing"
    assert score_reward(None, b"nan", "").status == "error"
    assert score_reward(b'{"a": "x"}', None, "").status == "error"
    assert score_reward(b"[1]", None, "").status == "error"


def test_zero_reward_without_any_test_run_after_failed_download_is_infra():
    out = "error: No interpreter found for Python 3.13 in managed installations\n"
    v = score_reward(None, b"0", out)
    assert v.status == "error" and v.failure_mode == "infra_error"


def test_zero_reward_with_tests_run_stays_a_failure_even_if_curl_failed():
    out = "curl: (6) Could not resolve host: astral.sh\n== short test summary info ==\nFAILED t::a\n"
    v = score_reward(None, b"0", out)
    assert v.status == "failed" and v.score == 0.0
