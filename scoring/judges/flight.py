"""One question, one paid call: whoever needs an answer being asked right now waits for it.

Within a process, a table of futures keyed by cache key: the first caller asks, the others wait
for its answer (thread-safe futures, so callers in other event loops of the process wait too).
Across processes and machines, the cache may offer ``aflight(key, ttl_s=...)``: an async
context manager that yields a :class:`SharedFlight` once this process may ask, or once another
asker's answer is in the cache (the database cache holds a row per question in flight).

The asker re-reads the cache once it holds the question: an answer cached between its first
look and its claim is used instead of being paid for again. When the asker fails, the question
is free again and the next caller asks itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from scoring.judges.cache import JudgeCache, cache_get

Answer = dict[str, Any]


class SharedFlight(Protocol):
    """A claim on a question across processes."""

    # An answer another asker cached while this one waited: use it, ask nothing.
    answer: Answer | None

    async def renew(self) -> None:
        """Keep the claim alive (before each attempt and while waiting out an outage)."""
        ...


class FlightCache(Protocol):
    def aflight(self, key: str, *, ttl_s: float) -> AbstractAsyncContextManager[SharedFlight]: ...


@dataclass
class Flight:
    """This caller's turn at a question."""

    answer: Answer | None = None  # already answered by someone else: no call needed
    shared: SharedFlight | None = None
    result: Answer | None = None

    async def renew(self) -> None:
        if self.shared is not None:
            await self.shared.renew()

    def answered(self, value: Answer) -> None:
        """The answer this caller obtained (handed to the callers that waited for it)."""
        self.result = value


_flights: dict[str, concurrent.futures.Future[Answer | None]] = {}
_flights_lock = threading.Lock()


def in_flight() -> int:
    """How many questions this process is asking right now."""
    with _flights_lock:
        return len(_flights)


@asynccontextmanager
async def single_flight(
    cache: JudgeCache | None, key: str, *, ttl_s: float
) -> AsyncIterator[Flight]:
    """Wait while another caller asks ``key``; yield a :class:`Flight` (see the module doc)."""
    while True:
        with _flights_lock:
            running = _flights.get(key)
            if running is None:
                mine: concurrent.futures.Future[Answer | None] = concurrent.futures.Future()
                _flights[key] = mine
        if running is None:
            break
        # Shielded: a waiter that is cancelled must not cancel the asker's future.
        answer = await asyncio.shield(asyncio.wrap_future(running))
        if answer is not None:
            yield Flight(answer=answer)
            return
        # The asker failed: the question is free again.

    flight = Flight()
    try:
        opener = getattr(cache, "aflight", None)
        if opener is None:
            flight.answer = await cache_get(cache, key)
            yield flight
        else:
            async with opener(key, ttl_s=ttl_s) as shared:
                flight.shared = shared
                flight.answer = shared.answer
                # A claim that re-read the cache itself (``looked``) saves a round trip.
                if flight.answer is None and not getattr(shared, "looked", False):
                    flight.answer = await cache_get(cache, key)
                yield flight
    finally:
        with _flights_lock:
            _flights.pop(key, None)
        mine.set_result(flight.result if flight.result is not None else flight.answer)
