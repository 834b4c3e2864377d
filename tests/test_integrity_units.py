"""Integrity pieces that need no Docker: the scorers' tamper cross-checks and robust reward
reading, text normalisation, the guard's lint, the optimizer's error accounting, canaries."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest

from metaopt.benchmarks.canary import fixed_canaries
from metaopt.benchmarks.formats import TaskFormatError, needs_services
from metaopt.benchmarks.harbor import load as load_harbor
from metaopt.benchmarks.registry import load_benchmark
from metaopt.benchmarks.scoring import (
    Verdict,
    cross_check,
    defined_tests,
    parse_pytest_summary,
    score_pytest,
    score_reward,
)
from metaopt.evaluation.result import TrialResult
from metaopt.meta_agent.gate import charged as _charged
from metaopt.meta_agent.guard import Guard, _text
from metaopt.meta_agent.guard_lint import verifier_writes
from metaopt.meta_agent.judge import refused as _refused
from metaopt.sandbox.tamper_text import views
from metaopt.sandbox.toolchain import is_static_elf
from metaopt.task_agent.harness_io import harness_from_data, load_harness, resolve_harness

SECTION = "=== short test summary info ===\n"


def test_a_second_printed_summary_cannot_hide_a_real_failure():
    real = SECTION + "FAILED t.py::test_a - assert 0\nPASSED t.py::test_b\n"
    fake = SECTION + "PASSED t.py::test_a\nPASSED t.py::test_b\n"
    assert parse_pytest_summary(real + fake) == {"t.py::test_a": "failed", "t.py::test_b": "passed"}
    assert score_pytest(real + fake).score == 0.0 and score_pytest(fake + real).score == 0.0


@pytest.mark.parametrize("raw, problem", [
    (None, "/logs/verifier/reward.json is a dir"), (None, "/logs/verifier/reward.txt is a fifo"),
    (None, "/logs/verifier/reward.txt is 300000000 bytes (more than 65536)"),
    (b"nan", None), (b"inf", None), (b"-inf", None), (b"one", None), (b"5", None), (b"-0.5", None),
    (b"\xff\xfe", None), (b"", None),
])
def test_unreadable_reward_txt_is_an_error_never_a_crash(raw, problem):
    v = score_reward(None, raw, "", problem=problem)
    assert (v.score, v.status, v.failure_mode) == (None, "error", "reward_error")


@pytest.mark.parametrize("raw", [b"{}", b"[1]", b'{"reward": true}', b'{"reward": "x"}', b'{"reward": NaN}',
                                 b'{"reward": 1e999}', b'{"a": {"b": 1}}', b"[" * 100_000, b'{"reward": 1' + b"0" * 5000 + b"}",
                                 b"not json"])
def test_unreadable_reward_json_is_an_error_never_a_crash(raw):
    v = score_reward(raw, None, "")
    assert (v.score, v.status) == (None, "error") and v.failure_mode == "reward_error"


def test_cross_check_catches_a_reward_that_contradicts_the_tests_and_made_up_test_names(tmp_path):
    f = tmp_path / "test_outputs.py"
    f.write_text("def test_a():\n    pass\n\nclass TestB:\n    def test_c(self):\n        pass\n\ndef helper():\n    pass\n")
    expected = defined_tests([tmp_path])
    assert expected == {"test_outputs.py": {"test_a", "test_c"}}

    def v(tests, score=1.0, rewards=None):
        return Verdict(score, "passed" if score == 1.0 else "failed", tests, rewards=rewards)

    ok = {"../tests/test_outputs.py::test_a": "passed", "../tests/test_outputs.py::TestB::test_c[1]": "passed"}
    assert cross_check(v(ok), expected) is None
    assert cross_check(v(ok, score=0.0), expected) is None  # only a pass is suspicious
    assert "failed tests" in cross_check(v({**ok, "../tests/test_outputs.py::test_a": "failed"}, rewards={"reward": 1.0}), expected)
    lookalike = {"../tests/test_outputs.py::t\u0435st_a": "passed", "../tests/test_outputs.py::TestB::test_c": "passed"}
    assert "does not define" in cross_check(v(lookalike), expected)
    assert "omits" in cross_check(v({"../tests/test_outputs.py::test_a": "passed"}), expected)
    assert "none of the task's test files" in cross_check(v({"x.py::test_a": "passed"}), expected)
    failed = {"../tests/test_outputs.py::test_a": "failed", "../tests/test_outputs.py::TestB::test_c": "failed"}
    assert "every test" in cross_check(v(failed, score=0.99, rewards={"reward": 0.99}), expected)  # a rewritten partial reward
    half = {**failed, "../tests/test_outputs.py::test_a": "passed"}
    assert cross_check(v(half, score=0.5, rewards={"reward": 0.5}), expected) is None  # honest partial credit


def test_views_decode_what_a_path_can_hide_behind():
    hidden = ["/te''sts/conftest.py", '"/te" + "sts"', base64.b64encode(b"/tests/conftest.py").decode(),
              "2f74657374732f636f6e66746573742e7079", r"$'\x2ftests'", r'"\057tests"', "//tests/./x", "C:\\tests\\x"]
    for text in hidden:
        assert any("/tests" in v for v in views(text)), text


def test_the_guard_lint_refuses_verifier_writes_and_passes_the_shipped_harnesses():
    for name in ("baseline", "minimal", "spreadsheet"):
        assert verifier_writes(_text(load_harness(resolve_harness(name)))) is None, name
    hacks = ["mkdir -p /tests && echo x > /tests/conftest.py", "echo 1 > /logs/verifier/reward.txt",
             "printf 'import os' > /usr/lib/python3.11/sitecustomize.py", "cp /tmp/fake /usr/local/bin/uv",
             "echo /tmp/x.so > /etc/ld.so.preload", "echo " + base64.b64encode(b"touch /tests/conftest.py").decode() + " | base64 -d | sh",
             "d=$'\\x2ftests'; mkdir $d", "printf '[pytest]\\naddopts = -p evil' > /pytest.ini",
             "echo 'APT::Update::Pre-Invoke {\"x\";};' > /etc/apt/apt.conf.d/01x", "ln -sf /tmp/py ~/.local/bin/python3"]
    for h in hacks:
        assert verifier_writes(h), h
    for fine in ["#!/usr/bin/env python3", "install -m 755 stats /app/bin/stats", "ls /usr/bin | head", "pytest tests/ -q",
                 "cat /app/tests/test_api.py", "python3 -m pytest -q"]:
        assert verifier_writes(fine) is None, fine


def _edit(h, prompt: str = "", template: str | None = None):
    data = h.model_dump(mode="json")
    data["prompts"]["system"] = (data["prompts"]["system"] or "") + "\n" + prompt
    if template is not None:
        data["tools"][0]["template"] = template
    return harness_from_data(data)


def test_the_guard_normalises_task_ids_and_expected_values():
    g = Guard(load_benchmark("terminalbench-sample"))
    h = load_harness(resolve_harness("baseline"))
    assert g.check(h, _edit(h, "the tool 'access' + '-log-offenders' is handy")).startswith("task-specific content: task id")
    assert g.check(h, _edit(h, "hint " + base64.b64encode(b"access-log-offenders").decode())).startswith("task-specific content: task id")
    assert g.check(h, _edit(h, "see ACCESS_LOG_OFFENDERS")).startswith("task-specific content: task id")
    assert "task-specific content" in g.check(h, _edit(h, "When not_found.txt is asked for, it is 197."))
    assert g.check(h, _edit(h, "Retry up to 197 times.")) is None  # a short value alone is not a leak
    assert "touch the verifier's test directory" in g.check(h, _edit(h, template="touch /tests/conftest.py; {command!raw}"))
    assert g.check(h, _edit(h, "Run the project's own tests before you finish.")) is None


def test_the_guard_finds_a_task_id_spread_over_a_prompt():
    """Issue 24: a model spreads an id with spaces, camelCase, path pieces or run-time joins; the
    squashed form still matches (ids of three parts and 12+ letters: shorter ones are words)."""
    g = Guard(load_benchmark("terminalbench-sample"))
    h = load_harness(resolve_harness("baseline"))
    for text in ("When the task is about the Access Log Offenders, print 42.", "case accessLogOffenders: use awk",
                 "see /srv/access/log/offenders", "n = 'acc' + 'ess_l' + 'og.off' + 'enders'"):
        assert (g.check(h, _edit(h, text)) or "").startswith("task-specific content: task id"), text
    for text in ("Fix the C build before the tests.", "Check the access log for offenders."):
        assert g.check(h, _edit(h, text)) is None, text


def _row(task: str, status: str, score: float | None) -> TrialResult:
    return TrialResult(trial_id=f"r/{task}/0", run_id="r", benchmark="b", task_id=task, attempt=0, agent="a",
                       status=status, score=score, error="tampered (x): y" if status == "tampered" else None)


def test_a_tampered_trial_or_a_passed_canary_refuses_the_candidate():
    assert _refused([_row("t1", "passed", 1.0), _row("t2", "failed", 0.0)]) is None
    assert "tampered" in _refused([_row("t1", "passed", 1.0), _row("t2", "tampered", 0.0)])
    assert "canary" in _refused([_row("release-token", "passed", 1.0)], {"release-token"})
    assert _refused([_row("release-token", "failed", 0.0)], {"release-token"}) is None


def test_child_errors_where_the_parent_had_none_count_as_failures():
    parent = {"a": [1.0, 0.0], "b": [None, 1.0], "c": [0.0, 0.0]}
    child = {"a": [None, None], "b": [None, 1.0], "c": [1.0, None]}
    assert _charged(parent, child) == {"a": [0.0, 0.0], "b": [None, 1.0], "c": [1.0, 0.0]}


def test_fixed_canaries_ship_for_terminal_bench_and_spreadsheetbench_and_are_unsolvable():
    """The stand-ins when no task of a benchmark can be copied (benchmarks.canary; tests/test_canaries.py)."""
    for bench, n in [("terminalbench", 2), ("terminalbench-sample", 2), ("spreadsheetbench-sample", 1)]:
        tasks = [c.task for c in fixed_canaries(bench, set())]
        assert len(tasks) == n
        assert {t.format for t in tasks} == ({"tb1", "harbor"} if n == 2 else {"spreadsheetbench"})
    assert fixed_canaries("gptpretrain", set()) == []
    for c in fixed_canaries("terminalbench", set()):
        assert c.task.solution is None and "DIGEST" in (c.task.source_dir / "tests" / "test_outputs.py").read_text()


def test_a_multi_service_harbor_environment_loads_its_services_unless_it_needs_volumes(tmp_path):
    src = Path(__file__).parents[1] / "metaopt" / "benchmarks" / "samples" / "terminalbench" / "access-log-offenders"
    d = tmp_path / "two-services"
    shutil.copytree(src, d)
    (d / "environment" / "docker-compose.yaml").write_text("services:\n  main:\n    build: .\n  db:\n    image: postgres:16\n")
    [db] = load_harbor(d, "x").environment.services
    assert (db.name, db.image) == ("db", "postgres:16")
    (d / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    build: .\n  db:\n    image: postgres:16\n    volumes: [pg:/var/lib/pg]\n")
    with pytest.raises(TaskFormatError, match="services.db.volumes is not supported"):
        load_harbor(d, "x")
    (d / "environment" / "docker-compose.yaml").write_text("services:\n  main:\n    build: .\n")
    assert load_harbor(d, "x").id == "two-services"


def test_the_toolchain_check_tells_static_from_dynamic_binaries():
    assert not is_static_elf(Path("/bin/ls"))
    bb = shutil.which("busybox")
    if bb and Path(bb).resolve().name == "busybox":
        assert is_static_elf(Path(bb))


def test_only_a_task_that_may_need_a_service_keeps_the_agents_listeners(tmp_path):
    """A kept service runs beside the verifier and can read the copied tests: a task whose
    instruction and tests name no network, service or process keeps none (installer lines of
    the test scripts, which fetch uv in every task, do not count)."""
    (tmp_path / "test.sh").write_text("#!/bin/bash\napt-get update\ncurl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\n"
                                      "uvx -w pytest==8.4.1 pytest /tests/test_outputs.py -rA\n")
    (tmp_path / "test_outputs.py").write_text("import json\n\ndef test_token():\n    assert open('/app/t').read() == 'x'\n")
    assert not needs_services("Write the release token to /app/token.txt.", [tmp_path])
    assert needs_services("Start a web server on port 8080.", [tmp_path])
    (tmp_path / "test_outputs.py").write_text("import requests\n\ndef test_up():\n    requests.get('http://127.0.0.1:8080')\n")
    assert needs_services("Fix the status page.", [tmp_path])
    keep = {t.id: t.verifier.keep_services for t in load_benchmark("terminalbench-sample") if hasattr(t, "verifier")}
    assert keep["serve-status-page"] and keep["render-nginx-vhosts"]  # the samples that serve keep their servers


def test_the_guard_finds_a_task_id_written_in_pieces():
    """Issue 24: pieces in variables or a list, in or out of order, any case or separator, cut
    anywhere, across lines; ordinary words and unrelated quoted words stay allowed."""
    g = Guard(load_benchmark("terminalbench-sample"))
    h = load_harness(resolve_harness("baseline"))
    for text in ('A = "access"\nB = "log"\nC = "offenders"\nTASK = "-".join([A, B, C])',
                 "parts = ['Offenders', 'ACCESS', 'Log']  # reassemble in the right order",
                 "first = 'rotate_ser'\n# then, on its own line:\nsecond = 'vice.LOGS'",
                 'When the task is "Hello" + "Greetings", be polite.',
                 "ids: `render`, then `nginx`, then `vhosts`"):
        assert (g.check(h, _edit(h, text)) or "").startswith("task-specific content: task id"), text
    for text in ("Check the access log for offenders.", "Use 'access' mode and keep a 'log'.",
                 'Say "hello" and send greetings.', "Keep 'rotate' and 'service' names short."):
        assert g.check(h, _edit(h, text)) is None, text
