"""A local OpenAI-compatible chat-completions server for tests (the real client talks to it).

``FakeOpenAI(handler)``: ``handler(request_json) -> (status, body_dict)`` or a plain dict (200).
Every request body is kept in ``requests``. Use as a context manager; ``base_url`` ends in /v1.

``keep_alive=True`` answers in HTTP/1.1 and keeps connections open, as real servers (and the
OpenAI API) do: a client whose pooled connections outlive their event loop fails only then.
``connections`` counts the TCP connections accepted.

A handler may return :class:`Raw` (any body with any content type, as a proxy or another
API would answer) or :class:`Events` (a server-sent-events stream, each event after a delay;
``disconnects`` counts streams the client closed before their end, as llama.cpp notices a
cancelled request).

``fail_for(seconds, status, delay)`` makes it answer ``status`` to every request for that long
(an outage), after ``delay`` seconds, without calling the handler; ``failed`` keeps those
requests and ``max_in_flight_down`` counts how many were in flight at once. ``in_flight`` /
``max_in_flight`` count all requests being answered at once (a handler may sleep to keep one in
flight).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handler = Callable[[dict[str, Any]], Any]


@dataclass
class Raw:
    body: bytes
    content_type: str = "application/json"
    status: int = 200


@dataclass
class Events:
    """A streamed answer: ``events`` JSON objects sent as ``data:`` lines, ``delay_s`` apart."""

    events: list[dict[str, Any]]
    delay_s: float = 0.0
    done: bool = True


def chunk(
    content: str | None = None,
    *,
    reasoning: str | None = None,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    event: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        event["usage"] = usage
    return event


def completion(
    content: str, *, tokens_in: int = 11, tokens_out: int = 7, finish_reason: str = "stop"
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }


def audit_choices(user: str) -> list[tuple[int, str]]:
    """(index, title) of the scan findings an audit prompt lets the judge choose: those it
    lists, kept to its valid indices, as a server that enforces the answer's schema (whose
    index is one of them) keeps a model to. A version 3 prompt also lists findings that are
    matched already, which no answer may name."""
    listed = [(int(i), title) for i, title in re.findall(r"\[(\d+)\] Title: (.*)", user)]
    valid = re.search(r"Valid indices: ([0-9, ]*)", user)
    if valid is None:
        return listed
    allowed = {int(i) for i in valid.group(1).split(",") if i.strip()}
    return [(index, title) for index, title in listed if index in allowed]


def context_overflow(prompt_tokens: int, n_ctx: int) -> tuple[int, dict[str, Any]]:
    """llama.cpp's answer to a prompt longer than a slot's context (HTTP 400)."""
    return 400, {
        "error": {
            "code": 400,
            "message": f"request ({prompt_tokens} tokens) exceeds the available context size "
            f"({n_ctx} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt_tokens,
            "n_ctx": n_ctx,
        }
    }


def error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "server_error", "code": None}}


class FakeOpenAI:
    def __init__(
        self,
        handler: Handler,
        *,
        keep_alive: bool = False,
        pages: dict[str, Any] | None = None,
    ) -> None:
        self.handler = handler
        # path -> JSON answered (llama.cpp's /props, /v1/models, Ollama's /api/version; a POST
        # path too, as Ollama's /api/show); other GET paths are 404.
        self.pages = pages or {}
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.failed: list[dict[str, Any]] = []
        self.max_in_flight_down = 0
        self.disconnects = 0
        self._down_until = 0.0
        self._down_status = 503
        self._down_delay = 0.0
        self._in_flight_down = 0
        self._lock = threading.Lock()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
            disable_nagle_algorithm = True

            def setup(self) -> None:
                super().setup()
                with outer._lock:
                    outer.connections += 1

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                page = outer.pages.get(self.path)
                data = json.dumps(page if page is not None else {"error": "not found"}).encode()
                self.send_response(200 if page is not None else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path in outer.pages:
                    # Another API of the server (Ollama's POST /api/show), not a completion.
                    data = json.dumps(outer.pages[self.path]).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                with outer._lock:
                    outer.requests.append(body)
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                    down = time.monotonic() < outer._down_until
                    if down:
                        outer.failed.append(body)
                        outer._in_flight_down += 1
                        outer.max_in_flight_down = max(
                            outer.max_in_flight_down, outer._in_flight_down
                        )
                try:
                    if down:
                        time.sleep(outer._down_delay)
                        result: Any = (outer._down_status, error_body("service unavailable"))
                    else:
                        result = outer.handler(body)
                finally:
                    with outer._lock:
                        outer.in_flight -= 1
                        if down:
                            outer._in_flight_down -= 1
                if isinstance(result, Events):
                    self._stream(result)
                    return
                if isinstance(result, Raw):
                    status, data, ctype = result.status, result.body, result.content_type
                else:
                    status, payload = result if isinstance(result, tuple) else (200, result)
                    data, ctype = json.dumps(payload).encode(), "application/json"
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, result: Events) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                lines = [f"data: {json.dumps(e)}" for e in result.events]
                if result.done:
                    lines.append("data: [DONE]")
                try:
                    for line in lines:
                        time.sleep(result.delay_s)
                        self.wfile.write(f"{line}\n\n".encode())
                        self.wfile.flush()
                except OSError:
                    # The client closed the connection: a real server stops generating.
                    with outer._lock:
                        outer.disconnects += 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def fail_for(self, seconds: float, status: int = 503, *, delay: float = 0.0) -> None:
        """Answer ``status`` (after ``delay`` s) to every request for the next ``seconds``."""
        with self._lock:
            self._down_until = time.monotonic() + seconds
            self._down_status = status
            self._down_delay = delay

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
