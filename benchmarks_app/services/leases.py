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

The keeper also watches the run: once it is cancelled, the held lease says so
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
from datetime import timedelta
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus

logger = logging.getLogger(__name__)

T = TypeVar("T")


class LeaseLost(Exception):
    """Another worker holds this piece now; whatever this one was about to write is dropped."""


class RunCancelled(Exception):
    """The run of the held piece was cancelled: stop, keeping what was written."""


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


def piece_claim(*, piece_id: int) -> RunPiece | None:
    """Take a piece that nobody holds; ``None`` when it is held, done or gone."""
    now = timezone.now()
    claimable = Q(status__in=[PieceStatus.QUEUED, PieceStatus.WAITING]) | Q(
        status=PieceStatus.RUNNING, lease_expires_at__lt=now
    )
    taken = RunPiece.objects.filter(Q(pk=piece_id) & claimable).update(
        status=PieceStatus.RUNNING,
        attempt=F("attempt") + 1,
        lease_expires_at=now + timedelta(seconds=lease_seconds()),
        worker=worker_name(),
        started_at=now,
        finished_at=None,
    )
    if not taken:
        return None
    return RunPiece.objects.select_related("run").get(pk=piece_id)


def piece_end(*, piece: RunPiece, status: str, error: str = "") -> bool:
    """Mark a held piece ``done``/``failed``/``waiting``; False when its lease was taken over."""
    with transaction.atomic():
        return bool(
            RunPiece.objects.filter(pk=piece.pk, attempt=piece.attempt).update(
                status=status,
                lease_expires_at=None,
                finished_at=timezone.now() if status != PieceStatus.WAITING else None,
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
        self.lost = threading.Event()
        self.cancelled = threading.Event()
        self._stop_event = threading.Event()

    def run(self) -> None:
        poll = max(0.05, min(cancel_poll_seconds(), self.lease_s / 3))
        renew_at = time.monotonic() + self.lease_s / 3
        try:
            while not self._stop_event.wait(poll):
                if not self.cancelled.is_set() and self._run_cancelled():
                    logger.info("run #%s was cancelled; piece %s stops", self.run_id, self.piece_id)
                    self.cancelled.set()
                if time.monotonic() < renew_at:
                    continue
                renew_at = time.monotonic() + self.lease_s / 3
                try:
                    renewed = self.renew()
                except (OperationalError, InterfaceError):
                    # The database restarted or failed over: reconnect at the next tick (a
                    # lease that cannot be renewed for long simply expires).
                    logger.warning("run #%s: lease renewal lost its connection", self.run_id)
                    connection.close()
                    continue
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

    def _run_cancelled(self) -> bool:
        try:
            return EvaluationRun.objects.filter(pk=self.run_id, status=RunStatus.CANCELLED).exists()
        except Exception:  # a blip: look again next time (the renewal says if it lasts)
            logger.debug("run #%s: could not look for a cancel", self.run_id, exc_info=True)
            return False

    def renew(self) -> bool:
        now = timezone.now()
        renewed = RunPiece.objects.filter(
            pk=self.piece_id, attempt=self.attempt, status=PieceStatus.RUNNING
        ).update(lease_expires_at=now + timedelta(seconds=self.lease_s))
        if renewed:
            EvaluationRun.objects.filter(pk=self.run_id).update(updated_at=now)
        return bool(renewed)

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=10)


# How often a piece's loop looks at its lease keeper's word that the run was cancelled.
CANCEL_CHECK_S = 0.1


async def until_cancelled(work: Awaitable[T], *, run_id: int) -> T:
    """Await ``work`` unless the held piece's run is cancelled meanwhile: then its judge
    calls in flight are cancelled (each recorded as abandoned) and :class:`RunCancelled`
    is raised. Outside a piece, just ``work``."""
    cancelled = lease_cancelled()
    task = asyncio.ensure_future(work)
    if cancelled is None:
        return await task
    while not task.done():
        if cancelled.is_set():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise RunCancelled(f"run #{run_id} was cancelled")
        await asyncio.wait([task], timeout=CANCEL_CHECK_S)
    return task.result()
