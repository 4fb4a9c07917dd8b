"""One gate for every judge call of a process: concurrency, priority and a rate limit.

:class:`CallGate` bounds the HTTP requests in flight to one judge endpoint across every run,
repo and event loop of the process (:func:`gate_for` hands out one gate per endpoint, model
and limits), so that raising the concurrency of one run cannot multiply with the number of
runs a worker holds. Beyond the width it keeps

* a rate limit in requests and tokens per minute (``rpm``, ``tpm``; 0 is none) over a sliding
  minute; a token estimate is counted when the request starts and replaced by the usage the
  server reports;
* the provider's word: a 429 pauses every caller until its ``retry-after`` has passed and
  lowers the requests per minute to 80% of what the last minute carried (from 10 up); after
  ``recover_after`` answers in a row the limit grows back by a tenth, up to the configured one;
* priority: when calls queue, the one whose :data:`CALL_PRIORITY` is highest goes first (the
  audit schedule sets it to the length of the chain waiting behind the call);
* :meth:`narrow`/:meth:`succeeded`, as :class:`~scoring.judges.server.AdaptiveLimiter`: one
  call at a time after a shared-context overflow, widening again after successes.

It is thread-safe and not bound to an event loop: a waiter is woken through its own loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

# Higher first. Set by a scheduler in the task that makes the call (tasks copy the context).
CALL_PRIORITY: contextvars.ContextVar[float] = contextvars.ContextVar(
    "judge_call_priority", default=0.0
)

WINDOW_S = 60.0
# A 429 lowers the requests per minute only once the last minute carried this many.
_MIN_TIGHTEN = 10


@dataclass(order=True)
class _Waiter:
    sort_key: tuple[float, int]
    tokens: int = field(compare=False, default=0)
    loop: Any = field(compare=False, default=None)
    future: Any = field(compare=False, default=None)
    gone: bool = field(compare=False, default=False)


@dataclass
class Ticket:
    """One admitted request: its start in the rate window (to correct its token count)."""

    entry: list[float]


class CallGate:
    def __init__(
        self,
        width: int,
        *,
        rpm: int = 0,
        tpm: int = 0,
        widen_after: int = 8,
        recover_after: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_width = max(1, int(width))
        self.width = self.max_width
        self.rpm = max(0, int(rpm))
        self.tpm = max(0, int(tpm))
        self.rpm_now = self.rpm  # lowered by 429s; 0 = no limit
        self.widen_after = widen_after
        self.recover_after = recover_after
        self.clock = clock
        self.in_flight = 0
        self.max_in_flight = 0
        self.narrowed = 0
        self.throttles = 0
        self.paused_until = 0.0
        self._streak = 0
        self._ok_streak = 0
        self._lock = threading.Lock()
        self._waiters: list[_Waiter] = []
        self._seq = itertools.count()
        self._window: deque[list[float]] = deque()  # [start time, tokens]

    # --- admission -----------------------------------------------------------------------

    def _prune(self, now: float) -> None:
        while self._window and self._window[0][0] <= now - WINDOW_S:
            self._window.popleft()

    def _rate_wait(self, tokens: int, now: float) -> float:
        """Seconds until a request of ``tokens`` fits the rate limits (0: now)."""
        if now < self.paused_until:
            return self.paused_until - now
        self._prune(now)
        wait = 0.0
        if self.rpm_now and len(self._window) >= self.rpm_now:
            oldest = self._window[len(self._window) - self.rpm_now][0]
            wait = max(wait, oldest + WINDOW_S - now)
        if self.tpm and self._window:
            total = sum(e[1] for e in self._window) + min(tokens, self.tpm)
            for start, used in self._window:
                if total <= self.tpm:
                    break
                total -= used
                wait = max(wait, start + WINDOW_S - now)
        return wait

    def _wake_top(self) -> None:
        """Wake the first waiter so it can look again (under the lock)."""
        while self._waiters and self._waiters[0].gone:
            heapq.heappop(self._waiters)
        if not self._waiters or self.in_flight >= self.width:
            return
        top = self._waiters[0]
        fut = top.future
        if fut is not None and top.loop is not None:
            top.loop.call_soon_threadsafe(_resolve, fut)

    async def acquire(self, *, tokens: int = 0, priority: float | None = None) -> Ticket:
        prio = CALL_PRIORITY.get() if priority is None else priority
        loop = asyncio.get_running_loop()
        me = _Waiter((-prio, next(self._seq)), tokens=max(0, tokens), loop=loop)
        with self._lock:
            heapq.heappush(self._waiters, me)
        try:
            while True:
                with self._lock:
                    while self._waiters and self._waiters[0].gone:
                        heapq.heappop(self._waiters)
                    delay: float | None = None
                    if self._waiters[0] is me and self.in_flight < self.width:
                        now = self.clock()
                        delay = self._rate_wait(me.tokens, now)
                        if delay <= 0:
                            heapq.heappop(self._waiters)
                            me.gone = True
                            self.in_flight += 1
                            self.max_in_flight = max(self.max_in_flight, self.in_flight)
                            entry = [now, float(me.tokens)]
                            self._window.append(entry)
                            self._wake_top()
                            return Ticket(entry)
                    me.future = loop.create_future()
                with suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(me.future), timeout=delay)
        except BaseException:
            with self._lock:
                me.gone = True
                self._wake_top()
            raise

    def release(self, ticket: Ticket, *, tokens_used: int | None = None) -> None:
        with self._lock:
            if tokens_used is not None:
                ticket.entry[1] = float(tokens_used)
            self.in_flight -= 1
            self._wake_top()

    @asynccontextmanager
    async def slot(self, *, tokens: int = 0) -> AsyncIterator[Ticket]:
        ticket = await self.acquire(tokens=tokens)
        try:
            yield ticket
        finally:
            self.release(ticket)

    # --- feedback ------------------------------------------------------------------------

    def succeeded(self) -> None:
        with self._lock:
            self._streak += 1
            if self.width < self.max_width and self._streak >= self.widen_after:
                self.width += 1
                self._streak = 0
            self._ok_streak += 1
            if self.rpm_now != self.rpm and self._ok_streak >= self.recover_after:
                self._ok_streak = 0
                grown = int(self.rpm_now * 1.1) + 1
                self.rpm_now = 0 if not self.rpm and grown > 10_000 else grown
                if self.rpm and self.rpm_now >= self.rpm:
                    self.rpm_now = self.rpm
            self._wake_top()

    def narrow(self) -> None:
        with self._lock:
            self._streak = 0
            if self.width > 1:
                self.width = 1
                self.narrowed += 1

    def throttled(self, retry_after_s: float | None) -> None:
        """The provider answered 429: wait ``retry_after_s`` (all callers) and slow down."""
        with self._lock:
            now = self.clock()
            self.throttles += 1
            self._ok_streak = 0
            if retry_after_s:
                self.paused_until = max(self.paused_until, now + retry_after_s)
            self._prune(now)
            # Below a handful of requests a minute the pause alone is the remedy; a limit of
            # one or two a minute would stall the run long after the provider recovered.
            if len(self._window) >= _MIN_TIGHTEN:
                carried = int(len(self._window) * 0.8)
                if not self.rpm_now or carried < self.rpm_now:
                    self.rpm_now = carried

    def describe(self) -> dict[str, Any]:
        return {
            "width": self.width,
            "max_width": self.max_width,
            "rpm": self.rpm,
            "rpm_now": self.rpm_now,
            "tpm": self.tpm,
            "max_in_flight": self.max_in_flight,
            "throttles": self.throttles,
        }


def _resolve(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(None)


_gates: dict[tuple[Any, ...], CallGate] = {}
_gates_lock = threading.Lock()


def gate_for(
    base_url: str | None, model: str, *, width: int, rpm: int = 0, tpm: int = 0
) -> CallGate:
    """The process's gate for this endpoint, model and limits (created on first use)."""
    key = (base_url or "", model, int(width), int(rpm), int(tpm))
    with _gates_lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = CallGate(width, rpm=rpm, tpm=tpm)
        return gate


def estimate_tokens(*texts: str, answer_tokens: int = 0) -> int:
    """A rough count for the rate window before the server reports usage (4 chars a token)."""
    return sum(len(t) for t in texts) // 4 + answer_tokens


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds a 429's ``retry-after-ms`` or ``retry-after`` header asks to wait, if any."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    try:
        if raw_ms is not None:
            return max(0.0, float(raw_ms) / 1000)
    except ValueError:
        pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
