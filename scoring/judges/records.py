"""One ledger record per judge attempt, cache hits included: what each answer cost.

A plain :data:`Recorder` is told about an attempt once it has ended. A
:class:`DurableRecorder` (the database ledger) is told *before* the request goes out, so that
a call in flight when its worker dies is on record (as pending, later lost), and completes the
record after; for a valid answer the completion runs the cache write in the same transaction,
so an answer is never cached without its ledger row nor ledgered as ok without its answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

from scoring.judges import tracing

Recorder = Callable[["CallRecord"], None]

# What a ledger keeps of an answer or an error body: enough to see what went wrong.
RAW_RESPONSE_LIMIT = 20_000


# What a call cancelled in flight (its run cancelled, its worker stopping) is recorded with.
ABANDONED = "abandoned in flight: its run stopped"


@dataclass(frozen=True)
class Prompt:
    """The question a call asked (system and user text), kept once per distinct text.

    ``key`` hashes the text alone: the votes of one question, its re-asks and other judges or
    models asking the same text share one stored prompt (the cache key, ``prompt_hash``,
    also covers judge, model, version and vote number).
    """

    system: str
    user: str

    @cached_property
    def key(self) -> str:
        h = hashlib.sha256()
        for part in (self.system, self.user):
            data = part.encode("utf-8")
            h.update(f"{len(data)}:".encode())
            h.update(data)
        return h.hexdigest()


@dataclass
class CallRecord:
    judge: str
    model: str
    prompt_hash: str
    vote_number: int
    attempt: int
    latency_ms: float
    tokens_in: int
    tokens_out: int
    # "ok" | "cached" | "invalid" | "truncated" | "error" | "abandoned" (cancelled in flight);
    # "pending" while asked
    status: str
    error: str = ""
    # What the server returned before parsing (the answer's text, or an error's body); empty
    # for cache hits and for judges that ask no server.
    raw_response: str = ""
    prompt: Prompt | None = None
    tokens_reasoning: int = 0  # of tokens_out, those a reasoning model spent thinking
    tokens_cached: int = 0  # of tokens_in, those the server read from its prompt cache
    # How the request was asked (model, temperature, bound, seed, response format, stream).
    request: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class DurableRecorder(Protocol):
    """A recorder that writes an attempt as pending before the request and completes it after."""

    def __call__(self, record: CallRecord) -> None: ...

    async def abegin(self, record: CallRecord) -> Any:
        """Record the attempt as pending; returns what :meth:`aend` needs to find it."""
        ...

    async def aend(
        self, ticket: Any, record: CallRecord, *, then: Callable[[], None] | None = None
    ) -> None:
        """Complete the attempt; ``then`` (the cache write) runs in the same transaction."""
        ...


class CallLedger:
    """The records of one question: each attempt, or the cache hit that answered it."""

    def __init__(
        self,
        record: Recorder | None,
        *,
        judge: str,
        model: str,
        prompt_hash: str,
        vote_number: int,
        prompt: Prompt | None = None,
    ) -> None:
        self.request: dict[str, Any] = {}
        self.record = record
        self.durable = isinstance(record, DurableRecorder)
        self.judge = judge
        self.model = model
        self.prompt_hash = prompt_hash
        self.vote_number = vote_number
        self.prompt = prompt
        # The OpenTelemetry span of the attempt in flight (None when tracing is off).
        self._span: tracing.CallSpan | None = None

    def _make(
        self,
        attempt: int,
        started: float,
        status: str,
        tin: int = 0,
        tout: int = 0,
        err: str = "",
        raw: str = "",
        reasoning: int = 0,
        cached: int = 0,
    ) -> CallRecord:
        return CallRecord(
            judge=self.judge,
            model=self.model,
            prompt_hash=self.prompt_hash,
            vote_number=self.vote_number,
            attempt=attempt,
            latency_ms=round((time.perf_counter() - started) * 1000, 3) if started else 0.0,
            tokens_in=tin,
            tokens_out=tout,
            status=status,
            error=err[:2000],
            raw_response=raw[:RAW_RESPONSE_LIMIT],
            prompt=self.prompt,
            tokens_reasoning=reasoning,
            tokens_cached=cached,
            request=self.request if status != "cached" else {},
        )

    def cached(self, started: float) -> None:
        if self.record is not None:
            self.record(self._make(0, started, "cached"))

    async def begin(self, attempt: int) -> Any:
        self._span = tracing.call_span(
            judge=self.judge, model=self.model, vote_number=self.vote_number, attempt=attempt
        )
        if not self.durable:
            return None
        durable: Any = self.record
        writing = asyncio.ensure_future(durable.abegin(self._make(attempt, 0.0, "pending")))
        try:
            return await asyncio.shield(writing)
        except asyncio.CancelledError:
            # The row is written all the same: complete it, or it would stay pending although
            # its worker lives on.
            ticket = await writing
            abandoned = self._make(attempt, 0.0, "abandoned", err=ABANDONED)
            self._end_span(abandoned)
            await _to_the_end(durable.aend(ticket, abandoned))
            raise

    async def end(
        self,
        ticket: Any,
        attempt: int,
        started: float,
        status: str,
        tin: int = 0,
        tout: int = 0,
        err: str = "",
        *,
        raw: str = "",
        then: Callable[[], None] | None = None,
        reasoning: int = 0,
        cached: int = 0,
    ) -> bool:
        """Record how the attempt ended; ``True`` when ``then`` ran in the ledger's transaction.

        ``raw`` is what the server returned (capped at :data:`RAW_RESPONSE_LIMIT`).
        """
        record = self._make(attempt, started, status, tin, tout, err, raw, reasoning, cached)
        self._end_span(record)
        if self.durable:
            durable: Any = self.record
            await _to_the_end(durable.aend(ticket, record, then=then))
            return then is not None
        if self.record is not None:
            self.record(record)
        return False

    def _end_span(self, record: CallRecord) -> None:
        span, self._span = self._span, None
        if span is not None:
            span.end(
                status=record.status,
                tokens_in=record.tokens_in,
                tokens_out=record.tokens_out,
                tokens_cached=record.tokens_cached,
                tokens_reasoning=record.tokens_reasoning,
                latency_ms=record.latency_ms,
                error=record.error,
            )


async def _to_the_end(write: Awaitable[Any]) -> Any:
    """Await a ledger write that a cancellation of the caller does not stop half-way.

    Cancelling an ORM call made through ``sync_to_async`` drops it when it has not started, so
    a call cancelled while its completion waited for the thread would stay pending for ever.
    """
    writing = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(writing)
    except asyncio.CancelledError:
        await writing
        raise
