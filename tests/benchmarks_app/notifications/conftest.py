"""A real local webhook receiver: a threaded HTTP server on 127.0.0.1 that checks signatures."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from scoring.webhooks import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    verify_signature,
)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    signature_ok: bool

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Answers with ``statuses`` in turn (the last one repeats); records what it received.

    ``secret`` is what the receiver checks signatures with, as a real receiver would.
    """

    url: str = ""
    secret: str = ""
    statuses: list[int] = field(default_factory=lambda: [200])
    redirect_to: str = ""
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_status(self) -> int:
        with self.lock:
            index = min(len(self.received), len(self.statuses)) - 1
            return self.statuses[max(index, 0)]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            headers = {k: v for k, v in self.headers.items()}
            ok = verify_signature(
                receiver.secret,
                self.headers.get(TIMESTAMP_HEADER, ""),
                body,
                self.headers.get(SIGNATURE_HEADER, ""),
            )
            with receiver.lock:
                receiver.received.append(Received(self.path, headers, body, ok))
            status = receiver.next_status()
            self.send_response(status)
            if 300 <= status < 400 and receiver.redirect_to:
                self.send_header("Location", receiver.redirect_to)
            self.send_header("Content-Type", "text/plain")
            answer = b"ok" if status < 300 else b"receiver says no"
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            return None

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/eval"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


HEADERS = (EVENT_HEADER, DELIVERY_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)


@dataclass
class RawReceiver:
    """A bare TCP receiver whose answer is written by ``answer(conn)``, byte by byte if it
    likes; ``closed_by_peer`` is set when a write fails because the client hung up on it."""

    url: str = ""
    closed_by_peer: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    sent: int = 0
    requests: int = 0

    def send(self, conn: socket.socket, data: bytes) -> bool:
        """False once the client has gone."""
        try:
            conn.sendall(data)
        except OSError:
            self.closed_by_peer.set()
            return False
        self.sent += len(data)
        return True


@pytest.fixture
def raw_receiver() -> Iterator[
    Callable[[Callable[[RawReceiver, socket.socket], None]], RawReceiver]
]:
    servers: list[tuple[socket.socket, threading.Thread]] = []

    def start(answer: Callable[[RawReceiver, socket.socket], None]) -> RawReceiver:
        state = RawReceiver()
        server = socket.create_server(("127.0.0.1", 0))
        server.settimeout(0.2)

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return  # closed at the end of the test
                state.requests += 1
                with conn:
                    conn.settimeout(30)
                    with contextlib.suppress(OSError):
                        conn.recv(65536)  # the request; what it says does not matter here
                    answer(state, conn)
                state.finished.set()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        servers.append((server, thread))
        state.url = f"http://127.0.0.1:{server.getsockname()[1]}/hook"
        return state

    yield start
    for server, thread in servers:
        server.close()
        thread.join(timeout=35)
