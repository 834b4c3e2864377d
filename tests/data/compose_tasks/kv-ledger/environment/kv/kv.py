"""A tiny HTTP key-value store: GET /keys, GET /keys/NAME, PUT /keys/NAME, GET /health."""

import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = 8080
if "--check" in sys.argv:  # the healthcheck
    sys.exit(0 if urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=2).status == 200 else 1)

with open("/srv/seed.json") as f:
    STORE = json.load(f)
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def _send(self, code, body=b""):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            return self._send(200, b"ok\n")
        if self.path.rstrip("/") == "/keys":
            with LOCK:
                return self._send(200, "".join(k + "\n" for k in sorted(STORE)).encode())
        if self.path.startswith("/keys/"):
            with LOCK:
                value = STORE.get(self.path[len("/keys/"):])
            return self._send(404) if value is None else self._send(200, value.encode())
        self._send(404)

    def do_PUT(self):
        if not self.path.startswith("/keys/") or len(self.path) == len("/keys/"):
            return self._send(404)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        with LOCK:
            STORE[self.path[len("/keys/"):]] = body
        self._send(204)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("0.0.0.0", PORT), Handler).serve_forever()
