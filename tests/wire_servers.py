"""A local stand-in for the Anthropic Messages and OpenAI Chat Completions HTTP APIs.

The real SDK clients talk to it over HTTP on 127.0.0.1, so tests pin what goes over the wire
(request bodies and headers as the SDK sent them) without patching any SDK internals.
Replies are scripted per path, first in first out; a request with no scripted reply gets a 400
`invalid_request_error` (non-retryable, so a test that under-scripts fails fast).
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"


@dataclass
class Recorded:
    """One request as received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


class WireServer:
    """`with WireServer() as server:`; `server.url` is the Anthropic base URL,
    `server.openai_url` the OpenAI one (with /v1). `server.requests` lists what arrived."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: dict[str, deque[Reply]] = defaultdict(deque)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    def reply(self, path: str, body: Any, status: int = 200,
              headers: dict[str, str] | None = None, delay_s: float = 0.0) -> None:
        """Script the next reply to `path` (sent after `delay_s` seconds)."""
        self._replies[path].append(Reply(status, body, headers or {}, delay_s))

    def bodies(self, path: str) -> list[Any]:
        return [r.body for r in self.requests if r.path == path]

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            queue = self._replies.get(recorded.path)
            if queue:
                return queue.popleft()
        return Reply(400, anthropic_error("invalid_request_error",
                                          f"wire server: no scripted reply for {recorded.path}"))


def _handler(server: WireServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = raw.decode(errors="replace")
            path = self.path.split("?", 1)[0]
            reply = server._next(Recorded(self.command, path,
                                          {k.lower(): v for k, v in self.headers.items()}, body))
            data = json.dumps(reply.body).encode()
            time.sleep(reply.delay_s)
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                pass

        do_POST = do_GET = _serve

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

    return Handler


# --- Anthropic wire format ---------------------------------------------------------------

def anthropic_message(content: list[dict[str, Any]], *, stop_reason: str = "end_turn",
                      model: str = "claude-sonnet-4-5-20250929", id: str = "msg_01",
                      input_tokens: int = 100, output_tokens: int = 50,
                      cache_read: int = 0, cache_write: int = 0) -> dict[str, Any]:
    """A Messages API response body."""
    return {
        "id": id, "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_read_input_tokens": cache_read,
                  "cache_creation_input_tokens": cache_write},
    }


def thinking(text: str, signature: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": signature}


def redacted_thinking(data: str) -> dict[str, Any]:
    return {"type": "redacted_thinking", "data": data}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id: str, name: str, input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def anthropic_error(type: str, message: str) -> dict[str, Any]:
    """An Anthropic error body (HTTP status set by the caller: 529 overloaded, 429 rate limit)."""
    return {"type": "error", "error": {"type": type, "message": message}}


# --- OpenAI wire format ------------------------------------------------------------------

def openai_tool_call(id: str, name: str, arguments: str) -> dict[str, Any]:
    """`arguments` is the raw JSON string, as the API sends it (it may be malformed)."""
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_completion(content: str | None = None, *, tool_calls: list[dict[str, Any]] | None = None,
                      finish_reason: str = "stop", model: str = "gpt-5-mini-2025-08-07",
                      id: str = "chatcmpl-01", prompt_tokens: int = 100,
                      completion_tokens: int = 50, cached_tokens: int = 0,
                      reasoning_tokens: int = 0, **message_extra: Any) -> dict[str, Any]:
    """A Chat Completions response body; `message_extra` adds fields such as reasoning_content."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None,
                               **message_extra}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": id, "object": "chat.completion", "created": 1_760_000_000, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason,
                     "logprobs": None}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens,
                  "prompt_tokens_details": {"cached_tokens": cached_tokens},
                  "completion_tokens_details": {"reasoning_tokens": reasoning_tokens}},
    }


def openai_error(type: str, message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


class ScriptedAnthropic:
    """A stand-in for the streaming Anthropic Messages API, enough for Claude Code: requests that offer
the harness's tools (mcp__harness__*) get the next scripted step; any other request (Claude Code's
own side requests) gets a short text answer."""
    def __init__(self, script, prefix="mcp__harness__"):
        self.script, self.prefix, self.position = list(script), prefix, 0
        self.requests = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self):
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self):
        self.thread.start(); return self

    def __exit__(self, *a):
        self.httpd.shutdown(); self.httpd.server_close()

    def _blocks(self, body):
        tools = [t.get("name", "") for t in body.get("tools", [])]
        if not any(n.startswith(self.prefix) for n in tools) or self.position >= len(self.script):
            return [{"type": "text", "text": "ok"}], "end_turn"
        step = self.script[self.position]; self.position += 1
        calls = ([step] if "tool" in step else []) + step.get("tool_calls", [])
        blocks = ([{"type": "text", "text": step["text"]}] if "text" in step else []) + [
            {"type": "tool_use", "id": c["id"], "name": self.prefix + c["tool"], "input": c.get("arguments", {})} for c in calls]
        return blocks, "tool_use" if calls else "end_turn"

    def _handler(self):
        server = self
        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *a): pass
            def do_GET(self):
                self._json(200, {})
            def do_HEAD(self):
                self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                try: body = json.loads(raw or b"{}")
                except ValueError: body = {}
                server.requests.append((self.path, body))
                if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                    return self._json(200, {"input_tokens": 10})
                blocks, stop = server._blocks(body)
                msg = {"id": f"msg_{len(server.requests)}", "type": "message", "role": "assistant", "model": body.get("model", "m"),
                       "content": [], "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
                if not body.get("stream"):
                    return self._json(200, {**msg, "content": blocks, "stop_reason": stop})
                events = [("message_start", {"type": "message_start", "message": msg})]
                for i, b in enumerate(blocks):
                    start = {**b, "input": {}} if b["type"] == "tool_use" else {"type": "text", "text": ""}
                    delta = ({"type": "input_json_delta", "partial_json": json.dumps(b["input"])} if b["type"] == "tool_use"
                             else {"type": "text_delta", "text": b["text"]})
                    events += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
                               ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                               ("content_block_stop", {"type": "content_block_stop", "index": i})]
                events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                              "usage": {"output_tokens": 5}}), ("message_stop", {"type": "message_stop"})]
                data = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()
                self.send_response(200); self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
            def _json(self, status, obj):
                data = json.dumps(obj).encode()
                self.send_response(status); self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
        return H


class RoutedOpenAI(WireServer):
    """An OpenAI Chat Completions stand-in whose every reply is `route(request body)` (a
    completion dict): for callers whose requests arrive in no fixed order (many trials at once,
    another process). `with RoutedOpenAI(route) as s:`; `s.openai_url` is the base URL; a route
    that raises is a 400 the test sees."""

    def __init__(self, route: Callable[[Any], dict[str, Any]]) -> None:
        super().__init__()
        self.route = route

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
        try:
            return Reply(200, self.route(recorded.body))
        except Exception as e:  # noqa: BLE001 - a route bug is a 400 the test sees
            return Reply(400, openai_error("invalid_request_error", f"{type(e).__name__}: {e}"))
