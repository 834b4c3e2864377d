"""A local stand-in for the Anthropic Messages and OpenAI Chat Completions HTTP APIs.

The real SDK clients talk to it over HTTP on 127.0.0.1, so tests pin what goes over the wire
(request bodies and headers as the SDK sent them) without patching any SDK internals.
Replies are scripted per path, first in first out; a request with no scripted reply gets a 400
`invalid_request_error` (non-retryable, so a test that under-scripts fails fast).
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
              headers: dict[str, str] | None = None) -> None:
        """Script the next reply to `path`."""
        self._replies[path].append(Reply(status, body, headers or {}))

    def bodies(self, path: str) -> list[Any]:
        return [r.body for r in self.requests if r.path == path]

    def __enter__(self) -> WireServer:
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
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

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
