"""Riding out judge outages: one circuit breaker per judge (base URL and model) per process.

A judge that answers some calls and fails others is *healthy*: a call that keeps failing
transiently gives up after ``max_retries`` (a failed vote). A judge that fails every call is
*down*: after ``breaker_threshold`` transient failures in a row, with no answer in between,
the breaker opens and the calls stop counting retries. While it is open, one call at a time
goes out as the probe (paced by exponential backoff with jitter, capped at ``backoff_max_s``);
the others wait for it. An answer closes the breaker and the waiters go on. A call that has
seen the outage for longer than ``outage_patience_s`` raises
:class:`~scoring.judges.failures.JudgeUnavailable`, which pauses the run instead of failing it.

The breaker is shared by every event loop of the process (a worker may run several runs, each
in its own loop), so its state sits behind a thread lock and waiters are woken through their
own loop. It forgets everything once no call uses it: a run paused for an outage starts afresh
when it is picked up again, and stale state never outlives the calls that made it.

Whoever runs the calls may want to say so while they wait (a run's page: "judge unreachable
since 17:42:05, next try at 17:42:35"): :func:`outages_reported_to` names a listener for the
calls made in its context, which is handed an :class:`OutageView` each time one of them meets
the open breaker (before it waits, and each time it wakes) and ``None`` once one is answered.
The listener runs on the calling loop's thread: it must only take note, never block.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import random
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

from scoring.judges.failures import JudgeUnavailable

log = logging.getLogger(__name__)

# Waiters wake at least this often, to renew their claim on the question and to check their
# patience, even when nothing happens.
_WAKE_S = 5.0

Heartbeat = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class OutageView:
    """What a call waiting on an open breaker knows, in wall-clock seconds (``time.time()``).

    ``next_try`` is when the next probe may go out; ``None`` while one is in flight (a judge
    that does not answer holds it for its whole timeout). ``gives_up_at`` is when this call's
    patience ends and its run pauses, if the judge has not answered by then.
    """

    model: str
    base_url: str
    since: float
    next_try: float | None
    gives_up_at: float
    error: str


OutageListener = Callable[[OutageView | None], None]
_listener: contextvars.ContextVar[OutageListener | None] = contextvars.ContextVar(
    "judge_outage_listener", default=None
)


@contextmanager
def outages_reported_to(listener: OutageListener) -> Iterator[None]:
    """Report the outages met by the calls made in this context to ``listener`` (see the
    module docstring); the context is copied into the event loops those calls run in."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def _report(view: OutageView | None) -> None:
    listener = _listener.get()
    if listener is None:
        return
    try:
        listener(view)
    except Exception:  # a listener only takes note: its fault never fails a judge call
        log.debug("the outage listener failed", exc_info=True)


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.2g} s"


def _jitter(base_s: float, max_s: float, step: int) -> float:
    """Full jitter: uniform in [0, min(max, base * 2**step)]."""
    return random.uniform(0, min(max_s, base_s * (2 ** min(step, 30))))


@dataclass
class Patience:
    """How one call puts up with an outage: for ``seconds``, counted from when it met it.

    It also carries the call's settings for the breaker: how many transient failures in a row
    open it, and the backoff that paces the probes.
    """

    seconds: float
    threshold: int = 5
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    since: float | None = None

    def start(self) -> None:
        if self.since is None:
            self.since = time.monotonic()

    @property
    def waited_s(self) -> float:
        return 0.0 if self.since is None else time.monotonic() - self.since

    @property
    def deadline(self) -> float:
        return (self.since if self.since is not None else time.monotonic()) + self.seconds

    @property
    def exhausted(self) -> bool:
        return self.since is not None and self.waited_s >= self.seconds


class Attempt:
    """One request let through the breaker; it reports how the request ended."""

    def __init__(self, breaker: CircuitBreaker, patience: Patience, probe: bool) -> None:
        self.breaker = breaker
        self.patience = patience
        self.probe = probe
        self.reported = False

    def answered(self) -> None:
        """The server answered (any answer, even an invalid one or a refusal: it is up)."""
        self.reported = True
        self.breaker._answered(probe=self.probe)
        _report(None)

    def failed(self, reason: str) -> None:
        """A transient failure (connection, timeout, 429, 5xx)."""
        self.reported = True
        self.breaker._failed(reason, probe=self.probe, patience=self.patience)
        if self.breaker.is_open:
            _report(self.breaker.view(self.patience))


class CircuitBreaker:
    def __init__(self, base_url: str, model: str) -> None:
        self.base_url = base_url
        self.model = model
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.users = 0
        self._reset()

    def _reset(self) -> None:
        self.consecutive = 0  # transient failures in a row, with no answer in between
        self.opened_at: float | None = None
        self.opened_wall = 0.0  # the same moment by the wall clock, for people
        self.probing = False
        self.probe_failures = 0
        self.next_probe_at = 0.0
        self.last_error = ""

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    @asynccontextmanager
    async def used(self) -> AsyncIterator[CircuitBreaker]:
        """Count a call as a user while it talks to the judge (see the module docstring)."""
        with self._lock:
            self.users += 1
        try:
            yield self
        finally:
            with self._lock:
                self.users -= 1
                if self.users == 0:
                    self._reset()

    @asynccontextmanager
    async def attempt(
        self, patience: Patience, *, heartbeat: Heartbeat | None = None
    ) -> AsyncIterator[Attempt]:
        """Wait until a request may go out, then let it through; see :meth:`admit`."""
        attempt = Attempt(self, patience, await self.admit(patience, heartbeat=heartbeat))
        try:
            yield attempt
        finally:
            if attempt.probe and not attempt.reported:
                # Cancelled, or failed outside HTTP: let the next waiter probe.
                with self._lock:
                    self.probing = False
                    self._notify()

    async def admit(self, patience: Patience, *, heartbeat: Heartbeat | None = None) -> bool:
        """At once while closed (``False``); while open, as the only probe in flight (``True``).

        Raises :class:`JudgeUnavailable` once the call has waited out its patience.
        """
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self.opened_at is None:
                    return False
                now = time.monotonic()
                if not self.probing and now >= self.next_probe_at:
                    self.probing = True
                    return True
                patience.start()
                if patience.exhausted:
                    raise self._unavailable(patience)
                wake = self.next_probe_at if not self.probing else now + _WAKE_S
                timeout = max(0.0, min(wake, patience.deadline, now + _WAKE_S) - now)
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
                view = self._view(patience)
            _report(view)
            try:
                await asyncio.wait_for(waiter, timeout)
            except TimeoutError:
                pass
            finally:
                with self._lock:
                    self._waiters = [w for w in self._waiters if w[1] is not waiter]
            if heartbeat is not None:
                await heartbeat()

    def view(self, patience: Patience) -> OutageView | None:
        """The outage as a call with ``patience`` sees it; None while the breaker is closed."""
        with self._lock:
            return self._view(patience)

    def _view(self, patience: Patience) -> OutageView | None:
        # Called with the lock held. Monotonic times are turned into wall-clock ones here; the
        # start is the one taken when the breaker opened, the same in every view of it.
        if self.opened_at is None:
            return None
        now, wall = time.monotonic(), time.time()
        return OutageView(
            model=self.model,
            base_url=self.base_url,
            since=self.opened_wall,
            next_try=None if self.probing else wall + max(0.0, self.next_probe_at - now),
            gives_up_at=wall + (patience.deadline - now),
            error=self.last_error,
        )

    def unavailable(self, patience: Patience) -> JudgeUnavailable:
        with self._lock:
            return self._unavailable(patience)

    def _unavailable(self, patience: Patience) -> JudgeUnavailable:
        return JudgeUnavailable(
            f"judge {self.model} at {self.base_url} unreachable for {_seconds(patience.waited_s)} "
            f"(patience {_seconds(patience.seconds)}): {self.last_error or 'no answer'}",
            model=self.model,
            base_url=self.base_url,
            waited_s=patience.waited_s,
        )

    def _answered(self, *, probe: bool) -> None:
        with self._lock:
            self.consecutive = 0
            if probe:
                self.probing = False
            if self.opened_at is not None:
                log.warning(
                    "judge %s at %s answers again after %s",
                    self.model,
                    self.base_url,
                    _seconds(time.monotonic() - self.opened_at),
                )
                self.opened_at = None
                self.probe_failures = 0
            self._notify()

    def _failed(self, reason: str, *, probe: bool, patience: Patience) -> None:
        with self._lock:
            now = time.monotonic()
            self.consecutive += 1
            self.last_error = reason
            base, cap = patience.backoff_base_s, patience.backoff_max_s
            if probe:
                self.probing = False
                self.next_probe_at = now + _jitter(base, cap, self.probe_failures)
                self.probe_failures += 1
            if self.opened_at is None and self.consecutive >= max(1, patience.threshold):
                self.opened_at = now
                self.opened_wall = time.time()
                self.probe_failures = 1
                self.next_probe_at = now + _jitter(base, cap, 0)
                log.warning(
                    "judge %s at %s unreachable: %s; waiting up to %s",
                    self.model,
                    self.base_url,
                    reason,
                    _seconds(patience.seconds),
                )
            self._notify()

    def _notify(self) -> None:
        # Called with the lock held; each waiter is woken in its own loop.
        for loop, waiter in self._waiters:
            # A closed loop has nobody waiting in it any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_breakers: dict[tuple[str, str], CircuitBreaker] = {}
_breakers_lock = threading.Lock()


def breaker_for(base_url: str | None, model: str) -> CircuitBreaker:
    """The process's breaker for this judge."""
    url = base_url or "https://api.openai.com/v1"
    with _breakers_lock:
        breaker = _breakers.get((url, model))
        if breaker is None:
            breaker = _breakers[(url, model)] = CircuitBreaker(url, model)
        return breaker
