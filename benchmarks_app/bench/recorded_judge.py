"""The audit speed benches' fake judge: an OpenAI-compatible chat-completions server on
127.0.0.1 that answers, after ``LATENCY_S``, what the recorded o4-mini verdicts imply (the
offline judge's verdicts for the repos without a recording: :func:`stand_in_verdicts`), with
a prompt parser that costs what a server's tokenizer and prefix cache cost; and the same
answers without HTTP (:class:`LocalRecorded`). Used by :mod:`benchmarks_app.bench.audit_speed`
and :mod:`benchmarks_app.bench.audit_paths`."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from benchmarks_app.demo import SAMPLE_DATA
from scoring.audit.calibration import recorded_verdicts
from scoring.audit.folders import read_path
from scoring.audit.judges.prompts import build_user_prompt
from scoring.audit.types import MATCH, NONE, PARTIAL, AuditVerdict, ScanItem, TruthItem
from scoring.judges.llm import CallRecord

DATA = SAMPLE_DATA / "audit"
LATENCY_S = 0.2
Repo = tuple[str, list[TruthItem], list[ScanItem]]


_VERIFIED = re.compile(r"<verified_finding>(.*?)</verified_finding>", re.DOTALL)


_VALID = re.compile(r"Valid indices: ([0-9, ]*)")


# A byte-pair tokenizer's first pass (GPT-2's pre-tokenization, without \p classes): a server
# splits the whole prompt like this, then looks every piece up, on every request.
_PIECES = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+")


# Prompts a prefix cache remembers (vLLM's blocks, llama.cpp's slots): as many as requests in
# flight at the bench's concurrency.
CACHED_PROMPTS = 32


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Tokens ``a`` and ``b`` share from their start (a binary search over C comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class PromptParser:
    """What a server does with every prompt before the model sees it: tokenize it all, and
    find the longest prefix it already holds (served from cache, not evaluated again).

    It costs CPU per call as a server's tokenizer does (a regex pass and a vocabulary look-up
    per piece), and counts the prompt and cached tokens a server would report.
    """

    def __init__(self, *, remembered: int = CACHED_PROMPTS) -> None:
        self.vocabulary: dict[str, int] = {}
        self.recent: list[tuple[int, ...]] = []
        self.remembered = remembered
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.parsed = 0
        self.cpu_s = 0.0  # CPU time spent parsing (the thread's own)
        self._lock = threading.Lock()

    def tokens(self, text: str) -> tuple[int, ...]:
        vocabulary = self.vocabulary
        return tuple(
            vocabulary.setdefault(piece, len(vocabulary)) for piece in _PIECES.findall(text)
        )

    def parse(self, messages: list[dict[str, Any]]) -> tuple[int, int]:
        """(prompt tokens, of them cached) for one request's messages."""
        started = time.thread_time()
        ids = self.tokens("\n".join(str(m.get("content") or "") for m in messages))
        with self._lock:
            cached = max((_common_prefix(ids, seen) for seen in self.recent), default=0)
            self.recent.append(ids)
            del self.recent[: -self.remembered]
            self.prompt_tokens += len(ids)
            self.cached_tokens += cached
            self.parsed += 1
            self.cpu_s += time.thread_time() - started
        return len(ids), cached

    @property
    def cpu_ms_per_prompt(self) -> float:
        return 1000 * self.cpu_s / self.parsed if self.parsed else 0.0

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def bundled_repos() -> list[Repo]:
    data = read_path(DATA)
    out = []
    for scan in data.scans:
        if scan.scanner == "baseline":
            truths, scans = data.match_items(scan)
            out.append((scan.project_id, truths, scans))
    return out


def stand_in_verdicts(
    repo: str, truths: list[TruthItem], scans: list[ScanItem]
) -> list[tuple[str, int | None]]:
    """For a repo without a recording: the offline judge's verdict on all its findings.

    Three bundled repos have no recorded o4-mini verdicts. Answering "neither" to all of their
    questions (as the fake once did) made every truth finding judge every batch, a call count
    no real judge produces; the offline judge's pick (deterministic) matches some findings,
    so those repos' pools shrink as a real run's do.
    """
    from scoring.audit.judges.offline import OfflineAuditJudge

    judge = OfflineAuditJudge()
    judge.register(repo, truths, scans)
    out: list[tuple[str, int | None]] = []
    for truth in truths:
        verdict = judge.decide(truth, scans)
        index = verdict.index_of_finding_from_junior_auditor
        if verdict.is_match and index >= 0:
            out.append((MATCH, index))
        elif verdict.is_partial_match and index >= 0:
            out.append((PARTIAL, index))
        else:
            out.append((NONE, None))
    return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # 32 calls connect at once: the default backlog of 5 refuses some (connection errors
    # that the judge retries, but that cost a backoff).
    request_queue_size = 128


class RecordedJudgeServer:
    """A fake chat-completions server answering the recorded verdicts after ``latency_s``."""

    def __init__(self, repos: list[Repo], *, latency_s: float = LATENCY_S) -> None:
        self.latency_s = latency_s
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        # When the first request since :meth:`span_reset` came and its last answer went
        # (time.monotonic): how long a run spent judging, start-up and wrap-up left out.
        self.first_asked: float | None = None
        self.last_answered: float | None = None
        self._lock = threading.Lock()
        # The verified-finding block of the prompt → the recorded (label, index).
        self.answers: dict[str, tuple[str, int | None]] = {}
        self.recorded_repos = 0
        self.parser = PromptParser()
        for repo, truths, scans in repos:
            path = DATA / "recorded" / f"{repo}_results.json"
            if path.is_file():
                self.recorded_repos += 1
                recorded = recorded_verdicts(path)
            else:
                recorded = stand_in_verdicts(repo, truths, scans)
            for position, truth in enumerate(truths):
                block = self._block(build_user_prompt(truth, []))
                answer = recorded[position] if position < len(recorded) else (NONE, None)
                self.answers.setdefault(block, answer)
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm
            # and the client's delayed ACK add about 40 ms to every kept-alive answer.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with outer._lock:
                    if outer.first_asked is None:
                        outer.first_asked = time.monotonic()
                    outer.calls += 1
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                try:
                    time.sleep(outer.latency_s)
                    payload = outer.answer(body)
                finally:
                    with outer._lock:
                        outer.in_flight -= 1
                        outer.last_answered = time.monotonic()
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def span_reset(self) -> None:
        with self._lock:
            self.first_asked = self.last_answered = None

    @property
    def judging_s(self) -> float:
        """Seconds from the first request since :meth:`span_reset` to the last answer."""
        if self.first_asked is None or self.last_answered is None:
            return float("nan")
        return self.last_answered - self.first_asked

    @staticmethod
    def _block(user: str) -> str:
        m = _VERIFIED.search(user)
        return m.group(1) if m else ""

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt_tokens, cached_tokens = self.parser.parse(body["messages"])
        user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
        label, index = self.answers.get(self._block(user), (NONE, None))
        valid = _VALID.search(user)
        batch = {int(x) for x in valid.group(1).split(",") if x.strip()} if valid else set()
        if label in (MATCH, PARTIAL) and index in batch:
            verdict = {
                "is_match": label == MATCH,
                "is_partial_match": label == PARTIAL,
                "explanation": f"Recorded verdict: finding {index}.",
                "severity_from_junior_auditor": "High",
                "severity_from_truth": "High",
                "index_of_finding_from_junior_auditor": index,
            }
        else:
            verdict = {
                "is_match": False,
                "is_partial_match": False,
                "explanation": "No finding in this batch matches.",
                "severity_from_junior_auditor": "N/A",
                "severity_from_truth": "N/A",
                "index_of_finding_from_junior_auditor": -1,
            }
        content = json.dumps(verdict)
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(content) // 4,
                "prompt_tokens_details": {"cached_tokens": cached_tokens},
            },
        }

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> RecordedJudgeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


class LocalRecorded:
    """The fake server's answers without HTTP or latency (the simulated reference)."""

    name, model = "openai", "o4-mini"

    def __init__(self, server: RecordedJudgeServer, records: list[CallRecord]) -> None:
        self.server = server
        self.records = records

    async def judge(self, truth: TruthItem, batch: Any, *, vote_number: int) -> Any:
        user = build_user_prompt(truth, batch)
        body = {"messages": [{"role": "user", "content": user}]}
        content = self.server.answer(body)["choices"][0]["message"]["content"]
        self.records.append(CallRecord(self.name, self.model, "", vote_number, 1, 0.0, 0, 0, "ok"))
        return AuditVerdict.model_validate_json(content)
