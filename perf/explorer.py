"""Explorer endpoint latency on a store with 1,000,000 spans (target: every view < 300 ms),
the failure clusters and paired views of `metaopt diagnose` (issue 28) included.

Fills a fresh store with synthetic rows shaped like real ones (traces/exporter.py columns), in
SQL (INSERT ... SELECT FROM range()): one experiment of 20 candidates x 100 tasks x 5 trials =
10,000 trials, 100 spans each (invoke_agent > 50 chat + 49 execute_tool), a messages row per
chat output and two per tool call (~1.5M), some tool errors and turn-limit episodes. Trial ids
grow in append order, as real ones do (they start with the run id, which starts with a time). Then serves
it with the real HTTP server and times each endpoint over HTTP, reading a snapshot of the store as
`metaopt ui` does (the one-off first copy is timed apart).

    python -m perf.explorer [--spans 1000000] [--db PATH] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

from metaopt.traces.store import Store

SPANS_PER_TRIAL = 100


def fill(path: Path, n_spans: int) -> dict[str, str]:
    """Write the synthetic store; returns ids the timed requests use."""
    n_trials = n_spans // SPANS_PER_TRIAL
    n_cands, n_tasks = 20, 100
    exp = "exp-perf"
    with Store(path) as s:
        c = s.con
        c.execute("INSERT INTO experiments VALUES (?, 'perf', '{}', ?, 'finished', now(), now(), NULL)",
                  [exp, json.dumps({"train": [f"task-{i:03d}" for i in range(50)],
                                    "validation": [f"task-{i:03d}" for i in range(50, 75)],
                                    "test": [f"task-{i:03d}" for i in range(75, 100)]})])
        c.execute(f"""INSERT INTO candidates (candidate_id, experiment_id, parent_id, iteration, status, proposer, rationale,
            evidence, diff, harness, harness_hash, status_reason, created_at) SELECT '{exp}/c' || i, '{exp}', CASE WHEN i > 0 THEN '{exp}/c' || (i - 1) END,
            i, CASE WHEN i = 0 THEN 'baseline' WHEN i % 3 = 0 THEN 'accepted' ELSE 'rejected' END, 'heuristic',
            'raised routing.limits.max_turns', '[]', '--- parent' || chr(10) || '+++ child' || chr(10) || '-  max_turns: 8' || chr(10) || '+  max_turns: 16',
            '{{}}', md5(i::VARCHAR), NULL, now() FROM range({n_cands}) t(i)""")
        c.execute(f"""INSERT INTO gate_decisions (experiment_id, candidate_id, parent_id, stage, outcome, delta, se, threshold,
            n_tasks, coverage, reason, rule, details, decided_at) SELECT '{exp}', '{exp}/c' || i, '{exp}/c' || (i - 1), 'validation',
            CASE WHEN i % 3 = 0 THEN 'accept' ELSE 'reject' END, 0.1, 0.03, 0.05, 25, 1.0, 'reason', 'rule', NULL, now()
            FROM range(1, {n_cands}) t(i)""")
        # trial k: candidate k // (tasks * 5 trials), task (k // 5) % tasks, attempt k % 5
        per_cand = max(1, n_trials // n_cands)
        c.execute(f"""INSERT INTO trials (trial_id, run_id, benchmark, task_id, attempt, agent, score, status, failure_mode,
                test_output, duration_s, input_tokens, output_tokens, cost_usd, trace_id, started_at, finished_at,
                experiment_id, candidate_id, split, tests)
            SELECT 'tr-' || lpad(k::VARCHAR, 7, '0'), '{exp}/c' || (k // {per_cand}) || ':run', 'perf', 'task-' || lpad(((k // 5) % {n_tasks})::VARCHAR, 3, '0'),
                k % 5, 'h@m', CASE WHEN hash(k) % 3 = 0 THEN 0.0 ELSE 1.0 END,
                CASE WHEN hash(k) % 3 = 0 THEN 'failed' ELSE 'passed' END,
                CASE WHEN hash(k) % 3 = 0 THEN 'tests_failed' END, repeat('verifier output line' || chr(10), 200),
                12.5, 5000, 800, 0.01, md5(k::VARCHAR), now(), now(), '{exp}', '{exp}/c' || (k // {per_cand}),
                CASE WHEN (k // 5) % {n_tasks} < 50 THEN 'train' WHEN (k // 5) % {n_tasks} < 75 THEN 'validation' ELSE 'test' END,
                '{{"test_a": "passed", "test_b": "failed"}}'
            FROM range({n_trials}) t(k)""")
        c.execute(f"""INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, duration_ms,
                status_code, service_name, run_id, trial_id, task_id, operation_name, request_model, response_model,
                tool_name, tool_call_id, input_tokens, output_tokens, error_type, attributes)
            SELECT md5((i // {SPANS_PER_TRIAL})::VARCHAR), lpad(printf('%x', i), 16, '0'),
                CASE WHEN j > 0 THEN lpad(printf('%x', i - j), 16, '0') END,
                CASE WHEN j = 0 THEN 'invoke_agent baseline' WHEN j % 2 = 1 THEN 'chat m' ELSE 'execute_tool bash' END,
                'INTERNAL', (i // {SPANS_PER_TRIAL}) * 10000000000 + j * 100000000,
                (i // {SPANS_PER_TRIAL}) * 10000000000 + j * 100000000 + CASE WHEN j = 0 THEN 9900000000 ELSE 90000000 END,
                CASE WHEN j = 0 THEN 9900.0 ELSE 90.0 END,
                CASE WHEN j = 98 AND (i // {SPANS_PER_TRIAL}) % 7 = 0 THEN 'ERROR' ELSE 'UNSET' END, 'metaopt',
                'run', 'tr-' || lpad((i // {SPANS_PER_TRIAL})::VARCHAR, 7, '0'), 'task', 
                CASE WHEN j = 0 THEN 'invoke_agent' WHEN j % 2 = 1 THEN 'chat' ELSE 'execute_tool' END, 'm', 'm',
                CASE WHEN j > 0 AND j % 2 = 0 THEN 'bash' END, CASE WHEN j > 0 AND j % 2 = 0 THEN 'call-' || j END,
                CASE WHEN j % 2 = 1 THEN 100 END, CASE WHEN j % 2 = 1 THEN 16 END,
                CASE WHEN j = 98 AND (i // {SPANS_PER_TRIAL}) % 7 = 0 THEN 'tool_error' END,
                CASE WHEN j = 0 THEN json_object('metaopt.outcome', CASE WHEN (i // {SPANS_PER_TRIAL}) % 5 = 0 THEN 'turn_limit' ELSE 'finished' END)
                     WHEN j % 2 = 0 THEN json_object('metaopt.tool.exit_code', 0) END
            FROM (SELECT i, i % {SPANS_PER_TRIAL} AS j FROM range({n_trials * SPANS_PER_TRIAL}) t(i))""")
        c.execute(f"""INSERT INTO messages SELECT md5((i // {SPANS_PER_TRIAL})::VARCHAR), lpad(printf('%x', i), 16, '0'),
                'tr-' || lpad((i // {SPANS_PER_TRIAL})::VARCHAR, 7, '0'), d.direction, i % {SPANS_PER_TRIAL}, CASE WHEN d.direction = 'tool_result' THEN 'tool' ELSE 'assistant' END,
                0, d.part_type, d.body || ' step ' || i || ' ' || repeat('lorem ipsum dolor ', 8), 'call-' || (i % {SPANS_PER_TRIAL}), 'bash',
                CASE WHEN d.part_type = 'text' THEN json_object('type', 'text', 'content', d.body || ' step ' || i)
                     WHEN d.part_type = 'tool_call' THEN json_object('type', 'tool_call', 'id', 'call-' || (i % {SPANS_PER_TRIAL}), 'name', 'bash', 'arguments', json_object('command', 'ls -la /app'))
                     ELSE json_object('type', 'tool_call_response', 'id', 'call-' || (i % {SPANS_PER_TRIAL}), 'response', d.body || ' step ' || i) END
            FROM range({n_trials * SPANS_PER_TRIAL}) t(i), (VALUES ('output', 'text', 'I will list the files', 1), ('tool_call', 'tool_call', 'ls -la /app', 0),
                ('tool_result', 'tool_call_response', 'total 4 drwxr-xr-x out.txt', 0)) d(direction, part_type, body, odd)
            WHERE i % {SPANS_PER_TRIAL} > 0 AND (i % 2) = d.odd""")
        c.execute("CHECKPOINT")
        n = c.execute("SELECT (SELECT count(*) FROM spans), (SELECT count(*) FROM messages), (SELECT count(*) FROM trials)").fetchone()
    print(f"store {path}: {n[0]:,} spans, {n[1]:,} messages, {n[2]:,} trials, {path.stat().st_size / 1e6:.0f} MB")
    mid = f"tr-{n_trials // 2 + 3:07d}"
    return {"experiment": exp, "trial": mid, "a": f"{exp}/c0", "b": f"{exp}/c{n_cands - 1}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--db", type=Path, default=None, help="Reuse (or create) this store instead of a temporary one.")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    from metaopt.explorer.server import make_server
    from metaopt.explorer.source import Source

    db = args.db or Path(tempfile.mkdtemp(prefix="metaopt-perf-")) / "perf.duckdb"
    t0 = time.perf_counter()
    if db.exists():
        with Store(db, read_only=True) as s:
            n = s.rows("SELECT count(*) AS n FROM spans")[0]["n"]
        ids = {"experiment": "exp-perf", "trial": f"tr-{n // SPANS_PER_TRIAL // 2 + 3:07d}", "a": "exp-perf/c0", "b": "exp-perf/c19"}
        print(f"reusing {db}: {n:,} spans")
    else:
        ids = fill(db, args.spans)
        print(f"filled in {time.perf_counter() - t0:.1f} s")
    source = Source(db)
    server = make_server(source, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/api/"
    task = "task-003"
    requests = [
        ("overview", "overview", {}),
        ("experiment (candidates, gate, diffs, progress)", "experiment", {"id": ids["experiment"]}),
        ("matrix (task x candidate)", "matrix", {"experiment": ids["experiment"]}),
        ("trial (transcript, waterfall, verifier)", "trial", {"id": ids["trial"]}),
        ("trial entry (lazy full text)", "trial/entry", {"id": ids["trial"], "n": "-1"}),
        ("failures by cause, whole store", "failures", {}),
        ("failures by cause, one experiment", "failures", {"experiment": ids["experiment"]}),
        ("search, frequent text", "search", {"q": "drwxr-xr-x"}),
        ("search, text found nowhere (first page)", "search", {"q": "no-such-text-anywhere"}),
        ("search, text found nowhere (a later page)", "search", {"q": "no-such-text-anywhere", "before": "700000"}),
        ("compare (task under 2 candidates)", "compare", {"task": task, "a": ids["a"], "b": ids["b"]}),
        ("failure clusters, one experiment", "clusters", {"experiment": ids["experiment"]}),
        ("paired (task under parent and child, stats, diff)", "paired", {"b": ids["b"], "task": task}),
        ("paired, default task", "paired", {"b": ids["b"]}),
        ("span lookup (a cited span)", "span", {"id": "00000000000f4000"}),
        ("unknown trial (404)", "trial", {"id": "nope"}),
    ]
    t = time.perf_counter()
    urllib.request.urlopen(base + "overview").read()
    print(f"first request (copies the store to a snapshot and opens it, once): {(time.perf_counter() - t) * 1000:.0f} ms")
    print(f"\n{'endpoint':52} {'median ms':>10} {'max ms':>8} {'bytes':>10}  (repeat {args.repeat}, target < 300 ms)")
    worst = 0.0
    for label, path, params in requests:
        times, size = [], 0
        for _ in range(args.repeat):
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(base + path + ("?" + urlencode(params) if params else "")) as r:
                    size = len(r.read())
            except urllib.error.HTTPError as e:
                size = len(e.read())
            times.append((time.perf_counter() - t) * 1000)
        med = statistics.median(times)
        worst = max(worst, med)
        print(f"{label:52} {med:10.1f} {max(times):8.1f} {size:10,}{'  OVER' if med >= 300 else ''}")
    print(f"\nslowest median {worst:.1f} ms: {'met' if worst < 300 else 'NOT met'} (< 300 ms)")
    server.shutdown()
    source.close()


if __name__ == "__main__":
    main()
