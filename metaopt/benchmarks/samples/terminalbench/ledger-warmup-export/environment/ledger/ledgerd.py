#!/usr/bin/env python3
"""ledgerd: a tiny double-entry ledger service.

On start it replays its write-ahead log (one segment at a time, verifying each segment's
checksum and rebuilding the account index) before it serves queries. Until replay has
finished, /healthz answers 503 and every other endpoint answers 503 too.

Endpoints (JSON):
  GET /healthz       {"status": "ready"|"replaying", "segments_done": n, "segments_total": m, "head": id}
  GET /v1/balances   {"head": id, "balances": {"ACCOUNT": cents, ...}}   (only when ready)
"""

import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WAL_DIR = os.environ.get("LEDGERD_WAL_DIR", "/var/lib/ledgerd/wal")
PORT = int(os.environ.get("LEDGERD_PORT", "9400"))
# Each segment is fsynced and re-indexed on replay; on the production disk this takes about a
# second per segment, which the service reproduces so that local runs behave like production.
SEGMENT_REPLAY_S = float(os.environ.get("LEDGERD_SEGMENT_REPLAY_S", "1.0"))

state = {"status": "replaying", "done": 0, "total": 0, "head": None, "balances": {}}
lock = threading.Lock()


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} ledgerd: {msg}", flush=True)


def replay():
    segments = sorted(f for f in os.listdir(WAL_DIR) if f.endswith(".wal"))
    with lock:
        state["total"] = len(segments)
    balances = {}
    head = None
    for name in segments:
        started = time.monotonic()
        with open(os.path.join(WAL_DIR, name)) as f:
            lines = f.read().splitlines()
        header, entries = lines[0], lines[1:]
        expected = header.split("sha256=", 1)[1]
        actual = hashlib.sha256("\n".join(entries).encode()).hexdigest()
        if actual != expected:
            log(f"segment {name}: checksum mismatch, refusing to start")
            os._exit(3)
        for line in entries:
            txid, debit, credit, cents = line.split()
            cents = int(cents)
            balances[debit] = balances.get(debit, 0) - cents
            balances[credit] = balances.get(credit, 0) + cents
            head = txid
        left = SEGMENT_REPLAY_S - (time.monotonic() - started)
        if left > 0:
            time.sleep(left)
        with lock:
            state["done"] += 1
        log(f"replayed {name} ({len(entries)} entries)")
    with lock:
        state.update(status="ready", head=head, balances=balances)
    log(f"ready, head {head}")


class Handler(BaseHTTPRequestHandler):
    def _send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with lock:
            snap = dict(state)
        ready = snap["status"] == "ready"
        if self.path == "/healthz":
            self._send(200 if ready else 503, {"status": snap["status"], "segments_done": snap["done"],
                                               "segments_total": snap["total"], "head": snap["head"]})
        elif self.path == "/v1/balances":
            if not ready:
                self._send(503, {"error": "replaying write-ahead log, try again later"})
            else:
                self._send(200, {"head": snap["head"], "balances": snap["balances"]})
        else:
            self._send(404, {"error": "not found"})

    def log_message(self, fmt, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    log(f"listening on 127.0.0.1:{PORT}, replaying {WAL_DIR}")
    threading.Thread(target=replay, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
