"""Leases on run pieces: who may work on a piece, and for how long.

A worker claims a :class:`~benchmarks_app.models.RunPiece` (``queued``/``waiting``, or
``running`` with an expired lease → ``running``, ``attempt + 1``) and holds it under a lease
that a :class:`LeaseKeeper` thread renews every third of ``RUN_LEASE_S``. A worker that dies
stops renewing; the sweeper (:mod:`benchmarks_app.services.sweeper`) hands its piece to another
worker once the lease has expired.

``attempt`` is the fencing token. While a piece is processed, :func:`lease_fence` is called
inside every transaction that writes for it (results, progress, the run's end): it writes the
piece's row (taking its row lock, or SQLite's write lock) and checks the attempt is still ours.
A worker that comes back after its lease was taken over gets :class:`LeaseLost` instead of
writing over the new owner.

The keeper also watches the run: once it is cancelled (or failed by another of its pieces:
the siblings of a failed piece stop too), the held lease says so
(:func:`lease_cancelled`), :func:`lease_fence` raises :class:`RunCancelled` on the piece's next
write, and processors that wait on the judge stop their calls in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Q
from django.db.models.functions import Now
from django.utils import timezone

from benchmarks_app.db_pool import connection_release, orm_trip
from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus, WorkerClock
from scoring.judges.outage import OutageView

logger = logging.getLogger(__name__)

T = TypeVar("T")


class LeaseLost(Exception):
    """Another worker holds this piece now; whatever this one was about to write is dropped."""


class RunCancelled(Exception):
    """The run of the held piece was cancelled, or failed by a sibling piece: stop, keeping
    what was written."""


def lease_seconds() -> float:
    return float(getattr(settings, "RUN_LEASE_S", 60))


def cancel_poll_seconds() -> float:
    return float(getattr(settings, "RUN_CANCEL_POLL_S", 1.0))


def worker_name() -> str:
    """``host:cluster-pid/worker-pid``: the cluster (its sentinel) is the worker's parent."""
    return f"{socket.gethostname()}:{os.getppid()}/{os.getpid()}"[:200]


@dataclass
class _Held:
    piece_id: int
    attempt: int
    # Set by the piece's LeaseKeeper once the run is cancelled.
    cancelled: threading.Event | None = None


_current = threading.local()


def current_lease() -> _Held | None:
    return getattr(_current, "held", None)


# The held piece's cancel event, also for the piece's event loop: ``async_to_sync`` runs the
# loop on another thread but copies the context (the lease itself stays on the piece's thread,
# where ``sync_to_async(thread_sensitive=True)`` brings every write back).
_cancel_var: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "run_piece_cancelled", default=None
)


def lease_cancelled() -> threading.Event | None:
    """Set once the run of the held piece is cancelled (None outside a piece)."""
    return _cancel_var.get()


@contextlib.contextmanager
def holding(piece: RunPiece, *, cancelled: threading.Event | None = None) -> Iterator[None]:
    """Make ``piece``'s lease the one that :func:`lease_fence` checks on this thread;
    ``cancelled`` is its keeper's event (:attr:`LeaseKeeper.cancelled`)."""
    previous = current_lease()
    _current.held = _Held(piece.pk, piece.attempt, cancelled)
    token = _cancel_var.set(cancelled)
    try:
        yield
    finally:
        _cancel_var.reset(token)
        _current.held = previous


def lease_holder(piece: RunPiece) -> str:
    """The ledger's name for one lease: pending calls of a lease taken over are lost."""
    return f"{piece.pk}:{piece.attempt}"


def lease_fence() -> None:
    """Check, inside the caller's transaction, that this thread's lease is still ours.

    A no-op outside a piece (tests and scripts that drive services directly).
    """
    held = current_lease()
    if held is None:
        return
    if held.cancelled is not None and held.cancelled.is_set():
        raise RunCancelled(f"piece {held.piece_id}: its run was cancelled")
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("lease_fence() must run inside the transaction it protects")
    # A write, not a read: it holds the row until the caller commits, so a claim by another
    # worker waits for this transaction instead of slipping between the check and the write.
    if not RunPiece.objects.filter(pk=held.piece_id, attempt=held.attempt).update(
        worker=F("worker")
    ):
        raise LeaseLost(f"piece {held.piece_id}: attempt {held.attempt} was taken over")


def database_now() -> datetime:
    """The database server's clock (the one leases are read by), aware, in UTC."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT statement_timestamp()")
            value = cursor.fetchone()[0]
        else:
            cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
            value = datetime.fromisoformat(cursor.fetchone()[0])
    if timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


def clock_skew_seconds() -> float:
    """How far the database's clock is ahead of this process's (negative: behind), the
    query's round trip halved out."""
    before = timezone.now()
    server = database_now()
    after = timezone.now()
    return (server - (before + (after - before) / 2)).total_seconds()


def worker_clock_record() -> float:
    """Measure this host's clock against the database's and keep it for ``/health/``,
    ``/metrics`` and the admin (one row per host); returns the skew in seconds."""
    skew = clock_skew_seconds()
    WorkerClock.objects.update_or_create(
        host=socket.gethostname()[:200], defaults={"skew_s": skew, "measured_at": Now()}
    )
    if abs(skew) > clock_skew_warn_seconds():
        logger.warning(
            "this host's clock is %.1f s %s the database's (leases use the database's clock; "
            "times this worker writes are off): synchronise it (NTP)",
            abs(skew),
            "behind" if skew > 0 else "ahead of",
        )
    return skew


def clock_skew_warn_seconds() -> float:
    return float(getattr(settings, "CLOCK_SKEW_WARN_S", 5))


def database_time_in(seconds: float) -> ExpressionWrapper:
    """The database's clock plus ``seconds``, to write: a lease ends by the clock that every
    claimant and the sweeper read, so a worker whose clock is off takes nobody's live lease
    nor writes a lease that is already over (or minutes long) for the others."""
    return ExpressionWrapper(Now() + timedelta(seconds=seconds), output_field=DateTimeField())


def claimable() -> Q:
    """Pieces nobody holds: waiting to be taken, or held under a lease that has ended by the
    database's clock."""
    return Q(status__in=[PieceStatus.QUEUED, PieceStatus.WAITING]) | Q(
        status=PieceStatus.RUNNING, lease_expires_at__lt=Now()
    )


def piece_claim(*, piece_id: int) -> RunPiece | None:
    """Take a piece that nobody holds; ``None`` when it is held, done or gone.

    The lease and its fence are taken by one compare-and-set statement: the update only
    matches the attempt number read just before (row-locked on PostgreSQL, skipped when
    another claimant holds the lock; SQLite's immediate transaction is its write lock), so
    of two claimants exactly one moves ``attempt`` on and knows the number it holds, never
    the other's. Reading the number back after the update let two claimants both hold it.
    """
    with transaction.atomic():
        seen = (
            RunPiece.objects.select_for_update(skip_locked=True)
            .filter(Q(pk=piece_id) & claimable())
            .values_list("attempt", flat=True)
            .first()
        )
        if seen is None:
            return None
        taken = RunPiece.objects.filter(Q(pk=piece_id, attempt=seen) & claimable()).update(
            status=PieceStatus.RUNNING,
            attempt=seen + 1,
            lease_expires_at=database_time_in(lease_seconds()),
            worker=worker_name(),
            started_at=Now(),
            finished_at=None,
        )
    if not taken:
        return None
    piece = RunPiece.objects.select_related("run").get(pk=piece_id)
    # The fence this claim took, even if the lease has ended and been taken again since.
    piece.attempt = seen + 1
    return piece


def piece_end(*, piece: RunPiece, status: str, error: str = "") -> bool:
    """Mark a held piece ``done``/``failed``/``waiting``; False when its lease was taken over."""
    with transaction.atomic():
        return bool(
            RunPiece.objects.filter(pk=piece.pk, attempt=piece.attempt).update(
                status=status,
                lease_expires_at=None,
                finished_at=Now() if status != PieceStatus.WAITING else None,
                error=error[:10000],
            )
        )


class LeaseKeeper(threading.Thread):
    """Renews a piece's lease (and the run's heartbeat) on a timer until stopped, and sets
    :attr:`cancelled` once the run is cancelled (looked at every ``RUN_CANCEL_POLL_S``).

    Renewal is tied to time, not to progress: a piece waiting on a slow judge keeps its lease,
    a dead process loses it. The thread has its own database connection and closes it.
    """

    def __init__(self, piece: RunPiece, *, lease_s: float | None = None) -> None:
        super().__init__(name=f"lease-{piece.pk}", daemon=True)
        self.piece_id = piece.pk
        self.run_id = piece.run_id
        self.attempt = piece.attempt
        self.lease_s = lease_s if lease_s is not None else lease_seconds()
        # Claimed inside the caller's uncommitted transaction (run_wait in a test or a script):
        # this thread's connection cannot see the piece, so a renewal would update no row and
        # call the lease taken over (PostgreSQL), though nobody else can see it to take it.
        self.renews = not transaction.get_connection().in_atomic_block
        self.lost = threading.Event()
        self.cancelled = threading.Event()
        self._stop_event = threading.Event()
        # The judge outage the piece's calls last met (judge_outage_seen), and what was
        # written of it: written on the next tick when they differ. An outage already on the
        # piece (it was parked on the judge, then handed out again) keeps its start.
        self._outage: OutageView | None = None
        self._outage_heard = False
        self._outage_lock = threading.Lock()
        stored = piece.judge_outage if isinstance(piece.judge_outage, dict) else {}
        self._outage_written: dict[str, object] = stored
        self._outage_floor = _epoch(stored.get("since"))

    def judge_outage_seen(self, view: OutageView | None) -> None:
        """The listener of the piece's judge calls (``outages_reported_to``): only takes
        note, on the calls' loop; the keeper's thread writes it."""
        with self._outage_lock:
            self._outage = view
            self._outage_heard = True
            if view is None:
                self._outage_floor = None  # answered: a later outage is a new one

    def judge_outage_record(self) -> dict[str, object]:
        """The outage as it is written on the piece ({} when none was met, or answered)."""
        with self._outage_lock:
            view = self._outage
        if view is None:
            return {}
        since = view.since if self._outage_floor is None else min(view.since, self._outage_floor)
        return {
            "since": _iso(since),
            "next_try": _iso(view.next_try) if view.next_try is not None else None,
            "gives_up_at": _iso(view.gives_up_at),
            "error": view.error[:500],
            "model": view.model,
        }

    def write_outage(self) -> None:
        """Write the outage the piece's calls last met onto the piece, when it changed."""
        if not self._outage_heard:
            return  # no call has said anything yet: what the piece holds stands
        record = self.judge_outage_record()
        if record == self._outage_written:
            return
        RunPiece.objects.filter(
            pk=self.piece_id, attempt=self.attempt, status=PieceStatus.RUNNING
        ).update(judge_outage=record)
        self._outage_written = record

    def run(self) -> None:
        poll = max(0.05, min(cancel_poll_seconds(), self.lease_s / 3))
        renew_at = time.monotonic() + self.lease_s / 3
        try:
            while not self._stop_event.wait(poll):
                try:
                    renewed = self._tick(renew_at)
                finally:
                    # Pooled: the connection goes back between ticks (a keeper mostly waits).
                    connection_release()
                if renewed is None:
                    continue
                renew_at = time.monotonic() + self.lease_s / 3
                if not renewed:
                    self.lost.set()
                    logger.warning(
                        "run #%s piece %s: lease of attempt %s was taken over",
                        self.run_id,
                        self.piece_id,
                        self.attempt,
                    )
                    return
        except Exception:  # a renewal that fails is a lease that expires: say so, then stop
            logger.exception("run #%s piece %s: lease renewal failed", self.run_id, self.piece_id)
        finally:
            connection.close()

    def _tick(self, renew_at: float) -> bool | None:
        """Look for a cancel; renew when due: whether renewed, None when not due (or the
        connection was lost: the database restarted or failed over, so reconnect at the next
        tick; a lease that cannot be renewed for long simply expires)."""
        if not self.cancelled.is_set() and self._run_cancelled():
            logger.info("run #%s has ended; piece %s stops", self.run_id, self.piece_id)
            self.cancelled.set()
        self._write_outage_quietly()
        if not self.renews or time.monotonic() < renew_at:
            return None
        try:
            return self.renew()
        except (OperationalError, InterfaceError):
            logger.warning("run #%s: lease renewal lost its connection", self.run_id)
            connection.close()
            return None

    def _write_outage_quietly(self) -> None:
        try:
            self.write_outage()
        except Exception:  # a blip: written at the next tick (the page is a second late)
            logger.debug("run #%s: could not record the judge outage", self.run_id, exc_info=True)

    def _run_cancelled(self) -> bool:
        """Cancelled, or failed while this piece works (another piece failed it, or it went
        past the re-queue cap): no judge call of this piece can count any more."""
        try:
            return EvaluationRun.objects.filter(
                pk=self.run_id, status__in=[RunStatus.CANCELLED, RunStatus.FAILED]
            ).exists()
        except Exception:  # a blip: look again next time (the renewal says if it lasts)
            logger.debug("run #%s: could not look for a cancel", self.run_id, exc_info=True)
            return False

    def renew(self) -> bool:
        renewed = RunPiece.objects.filter(
            pk=self.piece_id, attempt=self.attempt, status=PieceStatus.RUNNING
        ).update(lease_expires_at=database_time_in(self.lease_s))
        if renewed:
            EvaluationRun.objects.filter(pk=self.run_id).update(updated_at=Now())
        return bool(renewed)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=10)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def _epoch(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


# How often a piece's loop looks at its lease keeper's word that the run was cancelled.
CANCEL_CHECK_S = 0.1


def _no_query() -> None:
    pass


async def until_cancelled(work: Awaitable[T], *, run_id: int) -> T:
    """Await ``work`` unless the held piece's run is cancelled meanwhile: then its judge
    calls in flight are cancelled (each recorded as abandoned) and :class:`RunCancelled`
    is raised. Outside a piece, just ``work``."""
    cancelled = lease_cancelled()
    task = asyncio.ensure_future(work)
    if cancelled is None:
        return await task
    # The piece's thread hands back (pooled) the connection its preparation took.
    await orm_trip(_no_query)()
    while not task.done():
        if cancelled.is_set():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise RunCancelled(f"run #{run_id} was cancelled")
        await asyncio.wait([task], timeout=CANCEL_CHECK_S)
    return task.result()
