"""The pure parts of diagnosis: error normalisation, step alignment, the explorer's Host rule and
reading a model's answer. The clusters themselves are tested on a real store (test_diagnose.py)."""

from __future__ import annotations

from metaopt.explorer.paired import align
from metaopt.explorer.server import _host_ok, allowed_hosts
from metaopt.traces.diagnose import cluster_id, label, normalise
from metaopt.traces.diagnosis import _json_object


def test_normalise_masks_what_differs_between_two_occurrences_of_one_failure():
    a = normalise("bash: /app/run_42.sh: line 3: 0x7ffe12ab: No such file 'data.csv' (call_17) after 3.5s\nmore")
    b = normalise("bash: /tmp/x/y.sh: line 12: 0xdeadbeef: No such file \"other.csv\" (call_2) after 10s")
    assert a == b == "bash: <path> line <n>: <hex>: No such file <str> (<id>) after <n>s"
    assert normalise("HTTP 503 from model server at 2026-12-02T10:00:01") == "HTTP <n> from model server at <id>"
    assert normalise(None) == "" and normalise("\n\n  timeout  \n") == "timeout"
    assert len(normalise("x" * 500)) == 160


def test_a_signature_has_one_stable_id_and_a_readable_label():
    sig = {"mode": "timeout", "error": "timeout", "tool": "bash", "exit_status": "124", "where": "last third"}
    assert cluster_id(sig) == cluster_id(dict(reversed(list(sig.items())))) and len(cluster_id(sig)) == 12
    assert label(sig) == 'timeout: bash exit 124 "timeout" (last third)'
    assert label({"mode": "verifier failure", "error": "", "tool": None, "exit_status": None,
                  "where": "verifier"}) == "verifier failure: (verifier)"


def _step(key: str) -> dict:
    return {"kind": "tool", "name": "bash", "text": key, "result": "", "status": None, "span_id": key, "key": key}


def test_align_pairs_equal_steps_and_leaves_gaps_opposite_the_others():
    rows = align([_step(k) for k in "abcx"], [_step(k) for k in "abyczw"])
    assert [(r["a"] and r["a"]["text"], r["b"] and r["b"]["text"], r["same"]) for r in rows] == [
        ("a", "a", True), ("b", "b", True), (None, "y", False), ("c", "c", True), ("x", "z", False), (None, "w", False)]
    assert all("key" not in (r["a"] or {}) for r in rows)


def test_the_server_answers_only_the_host_and_port_it_is_bound_to():
    loop = allowed_hosts("127.0.0.1", 8765)
    assert loop is not None
    assert _host_ok("127.0.0.1:8765", loop, 8765) and _host_ok("localhost:8765", loop, 8765)
    for bad in ("evil.example:8765", "127.0.0.1:80", "127.0.0.1", "127.0.0.1.nip.io:8765", "", None):
        assert not _host_ok(bad, loop, 8765), bad
    lan = allowed_hosts("192.168.1.5", 80)
    assert lan == {"192.168.1.5:80"} and not _host_ok("localhost:80", lan, 80)
    anywhere = allowed_hosts("0.0.0.0", 9000)
    assert anywhere is None
    assert _host_ok("10.0.0.7:9000", None, 9000) and _host_ok("[::1]:9000", None, 9000)
    assert not _host_ok("rebind.example:9000", None, 9000) and not _host_ok("10.0.0.7:9001", None, 9000)


def test_the_first_json_object_of_an_answer_is_read_fenced_or_not():
    assert _json_object('Here:\n```json\n{"summary": "s", "claims": []}\n```') == {"summary": "s", "claims": []}
    assert _json_object('{not json} then {"a": {"b": 1}}') == {"a": {"b": 1}}
    assert _json_object("no object [1, 2]") is None
