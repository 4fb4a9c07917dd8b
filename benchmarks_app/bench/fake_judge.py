"""A fake OpenAI-compatible judge for the cluster harness (:mod:`.cluster`): a chat-completions
server on 127.0.0.1 that answers every audit batch the same way, counts what it answers, and
can be taken down (503s, or connections dropped unanswered) for the chaos scenarios.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _verdict(user: str) -> dict[str, Any]:
    """Deterministic, and cheap for the scenarios, which test the queue, not the judging: the
    words are those of the first finding the prompt lets it choose (its valid indices, as a
    server that enforces the answer's schema keeps a model to them; a prompt may list findings
    matched already), so that finding matches, the first of the batch. That is how this fake
    has answered since the audit prompt put the batch first (it reads the first "Title:"), and
    the scenarios' timings were set with it."""
    found = [(int(i), t.lower().split()) for i, t in re.findall(r"\[(\d+)\] Title: (.*)", user)]
    valid = re.search(r"Valid indices: ([0-9, ]*)", user)
    if valid is not None:
        allowed = {int(i) for i in valid.group(1).split(",") if i.strip()}
        found = [(i, t) for i, t in found if i in allowed]
    words = found[0][1] if found else []
    match = next((i for i, t in found if words and words[0] in t), None)
    part = next((i for i, t in found if len(words) > 1 and words[1] in t), None)
    index = match if match is not None else part if part is not None else -1
    return {
        "is_match": match is not None,
        "is_partial_match": match is None and part is not None,
        "explanation": "fake",
        "severity_from_junior_auditor": "High",
        "severity_from_truth": "High",
        "index_of_finding_from_junior_auditor": index,
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client killed mid-answer (the chaos is deliberate)


class FakeJudge:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 that counts what it answers.

    ``latency_s`` is added to every answer; ``down_for(s, mode)`` answers 503 (``mode="503"``)
    or drops the connection unanswered (``"drop"``) for ``s`` seconds. ``answered`` counts the
    answers it gave, also to clients that died meanwhile (what a real judge would bill).
    """

    def __init__(self, latency_s: float = 0.15) -> None:
        self.latency_s = latency_s
        self.answered = self.refused = self.in_flight = self.max_in_flight = 0
        self._down_until, self._down_mode = 0.0, "503"
        self._lock = threading.Lock()
        judge = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                status, payload = judge._answer(body)
                if status == 0:
                    return  # dropped: the connection closes with no answer
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = _Server(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def down_for(self, seconds: float, mode: str = "503") -> None:
        with self._lock:
            self._down_until, self._down_mode = time.monotonic() + seconds, mode

    def reset(self) -> None:
        with self._lock:
            self.answered = self.refused = self.max_in_flight = 0

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if time.monotonic() < self._down_until:
                self.refused += 1
                error = {"error": {"message": "judge down", "type": "server_error"}}
                return (0 if self._down_mode == "drop" else 503), error
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(self.latency_s)
        content = json.dumps(_verdict(str(body["messages"][-1]["content"])))
        with self._lock:
            self.in_flight -= 1
            self.answered += 1
        return 200, {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake-model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
