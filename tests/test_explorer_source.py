"""How the explorer reads the store: with a real concurrent writer process, without blocking a
writer that starts later, and with bad stores (missing, corrupt, newer schema) as one clear
line in the terminal and in the JSON the page shows. No Docker: rows are written through Store."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from _docker_fixtures import metaopt
from _shared_runs import ui_server

from metaopt.evaluation import TrialResult
from metaopt.explorer.queries import overview
from metaopt.explorer.server import make_server
from metaopt.explorer.source import Source
from metaopt.traces.store import Store, now

ROOT = Path(__file__).resolve().parents[1]


def _trial(i: int) -> dict:
    return {"trial_id": f"run-w/t{i:03d}/0", "run_id": "run-w", "benchmark": "b", "task_id": f"t{i:03d}", "attempt": 0,
            "agent": "nop", "score": 0.0, "status": "failed", "failure_mode": "tests_failed", "started_at": now()}


def _count(source: Source) -> tuple[int, str | None]:
    with source.open() as (store, note):
        return store.rows("SELECT count(*) AS n FROM trials")[0]["n"], note


def test_reads_snapshots_while_a_real_writer_holds_the_file(tmp_path):
    db = tmp_path / "w.duckdb"
    with Store(db) as s:
        s.begin_run("run-w", benchmark="b", agent="nop", dataset=None, args={})
        s.insert(TrialResult(**_trial(0)))
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        from test_explorer_source import _trial
        from metaopt.evaluation import TrialResult
        from metaopt.traces.store import Store
        with Store({str(db)!r}) as s:
            print("open", flush=True)
            for i in range(1, 31):
                s.insert(TrialResult(**_trial(i)))
                time.sleep(0.1)
            sys.stdin.readline()  # hold the file until the test says so
    """)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    source = Source(db, refresh_s=0.2)
    try:
        assert writer.stdout.readline().strip() == "open"
        seen, notes = [], []
        for _ in range(12):
            n, note = _count(source)
            seen.append(n)
            notes.append(note)
            time.sleep(0.3)
        assert seen == sorted(seen) and seen[-1] > seen[0] >= 1  # newer snapshots as the writer commits
        assert any(n and "is being written: showing a snapshot taken at" in n for n in notes), notes
        deadline = time.monotonic() + 20
        while _count(source) != (31, None):  # the writer is done: the next snapshot is the whole store
            assert time.monotonic() < deadline, _count(source)
            time.sleep(0.2)
        assert _can_write(db) is False  # the writer still holds the file, and the explorer read it all
    finally:
        writer.kill()
        source.close()


def test_the_explorer_never_blocks_a_writer(tmp_path):
    db = tmp_path / "i.duckdb"
    Store(db).close()
    source = Source(db, refresh_s=0.1)
    server = make_server(source, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/api/overview"
        with urllib.request.urlopen(url) as r:
            assert json.loads(r.read())["data"] == {"experiments": [], "runs": []}
        assert _can_write(db)  # right after a request: the explorer holds no handle on the file
        with Store(db) as s:
            s.begin_run("run-w", benchmark="b", agent="nop", dataset=None, args={})
        deadline = time.monotonic() + 10
        while True:  # the change shows up once the background copy is taken
            with urllib.request.urlopen(url) as r:
                if [x["run_id"] for x in json.loads(r.read())["data"]["runs"]] == ["run-w"]:
                    break
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        server.shutdown()
        source.close()


def _can_write(db: Path) -> bool:
    """Whether another process (as `metaopt run` would) can open the store for writing now."""
    r = subprocess.run([sys.executable, "-c", f"import duckdb; duckdb.connect({str(db)!r}).close()"],
                       capture_output=True, check=False, text=True)
    assert r.returncode == 0 or "lock" in r.stderr, r.stderr
    return r.returncode == 0


def _bad_stores(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    corrupt = tmp_path / "corrupt.duckdb"
    corrupt.write_bytes(b"this is not a database" * 100)
    newer = tmp_path / "newer.duckdb"
    with Store(newer) as s:
        s.con.execute("INSERT INTO schema_migrations VALUES ('9999_from_the_future', now())")
    return {"missing": (tmp_path / "missing.duckdb", "does not exist"),
            "corrupt": (corrupt, "cannot open store"),
            "newer": (newer, "written by a newer metaopt")}


@pytest.mark.parametrize("kind", ["missing", "corrupt", "newer"])
def test_bad_store_is_one_line_exit_2_in_the_terminal(tmp_path, kind):
    db, needle = _bad_stores(tmp_path)[kind]
    for args in (["ui", "--port", "0"], ["traces", "experiments"]):
        r = metaopt(*args, "--db", str(db), timeout=60)
        assert r.returncode == 2, r.stderr
        assert needle in r.stderr and str(db) in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) <= 2  # one line (rich may wrap a long path)


@pytest.mark.parametrize("kind", ["missing", "corrupt", "newer"])
def test_bad_store_is_a_message_in_the_json_the_page_shows(tmp_path, kind):
    """The store can go bad after `metaopt ui` started: every request says why, in one line."""
    db, needle = _bad_stores(tmp_path)[kind]
    source = Source(db)
    server = make_server(source, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/api/trial?id=x")
        body = json.loads(e.value.read())
        assert e.value.code == 503 and needle in body["error"] and "\n" not in body["error"]
    finally:
        server.shutdown()
        source.close()


def test_bad_parameters_and_unknown_paths_are_json_errors(tmp_path):
    db = tmp_path / "p.duckdb"
    Store(db).close()
    source = Source(db)
    server = make_server(source, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        for path, code, needle in (("/api/trial", 400, "missing query parameter 'id'"),
                                   ("/api/trial/entry?id=x&n=two", 400, "'n' must be an integer"),
                                   ("/api/search?q=%20", 404, "search needs some text"),
                                   ("/api/nothing", 404, "no endpoint /api/nothing")):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + path)
            assert e.value.code == code and needle in json.loads(e.value.read())["error"]
        with urllib.request.urlopen(base + "/") as r:
            assert b"metaopt trace explorer" in r.read()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/static/../../store.py")
        assert e.value.code == 404
    finally:
        server.shutdown()
        source.close()


def test_ui_binds_localhost_and_reports_a_busy_port(tmp_path):
    db = tmp_path / "u.duckdb"
    Store(db).close()
    with ui_server("--db", str(db), cwd=ROOT) as address:  # it printed 127.0.0.1: bound to localhost
        port = str(urlsplit(address).port)
        r = metaopt("ui", "--db", str(db), "--port", port, timeout=60)
        assert r.returncode == 2 and f"--port {port}" in r.stderr and "Traceback" not in r.stderr


def test_overview_separates_experiments_from_evaluation_runs(tmp_path):
    with Store(tmp_path / "o.duckdb") as s:
        s.begin_run("run-w", benchmark="b", agent="nop", dataset=None, args={})
        s.insert(TrialResult(**_trial(1)))
        data = overview(s)
    assert data["experiments"] == [] and data["runs"][0]["run_id"] == "run-w" and data["runs"][0]["trials"] == 1


def test_failures_are_grouped_by_cause_with_the_span_to_open(tmp_path):
    """Each cause's rule on rows shaped as the runner and exporter write them (the browser test
    covers turn limit and verifier failure from real runs; the rarer causes are built here)."""
    cases = {  # task: (status, failure_mode, agent outcome, tool error spans)
        "verifier": ("failed", "tests_failed", "finished", 0), "turns": ("failed", "tests_failed", "turn_limit", 0),
        "slow": ("timeout", "agent_timeout", "time_limit", 0), "tool": ("failed", "tests_failed", "finished", 2),
        "model": ("error", "agent_error", "model_error", 0), "sandbox": ("error", "sandbox_error", None, 0),
        "fine": ("passed", None, "finished", 1),
    }
    with Store(tmp_path / "c.duckdb") as s:
        for task, (status, mode, outcome, n_err) in cases.items():
            tid = f"run-c/{task}/0"
            s.insert(TrialResult(**{**_trial(0), "trial_id": tid, "run_id": "run-c", "task_id": task,
                                    "status": status, "failure_mode": mode}))
            if outcome is None:
                continue  # the sandbox failed before the agent ran: no spans
            s.con.execute("INSERT INTO spans (trace_id, span_id, name, start_ns, trial_id, operation_name, status_code,"
                          " attributes) VALUES (?, ?, 'invoke_agent x', 0, ?, 'invoke_agent', 'UNSET', ?)",
                          [task, f"{task}-agent", tid, json.dumps({"metaopt.outcome": outcome})])
            for i in range(n_err):
                s.con.execute("INSERT INTO spans (trace_id, span_id, parent_span_id, name, start_ns, trial_id,"
                              " operation_name, status_code, error_type) VALUES (?, ?, ?, 'execute_tool bash', ?, ?,"
                              " 'execute_tool', 'ERROR', 'tool_error')", [task, f"{task}-tool{i}", f"{task}-agent", i + 1, tid])
        from metaopt.explorer.queries import failure_causes

        groups = {g["cause"]: g for g in failure_causes(s, run_id="run-c")}
    assert set(groups) == {"verifier failure", "turn limit", "timeout", "tool error", "model error", "sandbox error"}
    where = {g: [(t["task_id"], t["span_id"]) for t in groups[g]["trials"]] for g in groups}
    assert where == {"verifier failure": [("verifier", None)], "turn limit": [("turns", "turns-agent")],
                     "timeout": [("slow", "slow-agent")], "tool error": [("tool", "tool-tool1")],  # the last failing call
                     "model error": [("model", "model-agent")], "sandbox error": [("sandbox", None)]}
    assert all(g["count"] == 1 for g in groups.values())
