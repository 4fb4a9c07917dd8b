"""Faults a run heals from without a person: a lost database connection, a judge outage, and
a piece that keeps coming back.

* **Database lost** (a PostgreSQL restart or fail-over ends every connection): the piece's
  worker drops its connection, reconnects and queues the piece again; the next holder marks
  the calls this one left ``pending`` as ``lost`` and redoes only what is missing. Nothing
  fails. While the database stays down the worker cannot even do that; its lease then expires
  and the sweeper hands the piece out once the database is back.
* **Judge down** (``JudgeUnavailable`` after ``JUDGE_OUTAGE_PATIENCE_S``): the piece is parked
  (``waiting``, ``retry_at`` = now + ``RUN_PARK_RETRY_S``) and its worker freed; the other
  pieces asking the same judge (the run's, and those of other runs made with the same judge
  record) are parked as soon as a worker takes them, without asking the judge, so an outage
  does not hold one worker per piece nor cost each run its own wait. The sweeper then sends
  one piece per judge to try it again and holds the others until the judge has answered
  (:func:`benchmarks_app.services.sweeper.runs_sweep`).
* **The re-queue cap**: every hand-out after a lost worker (expired lease) or connection
  counts; past ``RUN_PIECE_MAX_REQUEUES`` the piece and its run fail with the last cause (a
  piece that kills its worker every time ends instead of looping). Resent tasks (lost, or
  waiting in a busy cluster's prefetch) and judge pauses do not count.
"""

from __future__ import annotations

import errno
import logging
import time
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Now

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES, WRITE_FAILURE_PREFIX
from benchmarks_app.services.leases import database_now, database_time_in
from benchmarks_app.services.piece_sending import piece_send

logger = logging.getLogger(__name__)

# Waits between tries to queue a piece again while the database comes back (seconds).
RECONNECT_DELAYS_S = (0.0, 1.0, 2.0, 4.0, 8.0)


def database_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it, or one of a group's) is a lost or refused database
    connection, a transient fault, rather than a bug or bad data."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        error = todo.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, (OperationalError, InterfaceError)):
            return True
        if isinstance(error, BaseExceptionGroup):
            todo.extend(error.exceptions)
        for linked in (error.__cause__, error.__context__):
            if linked is not None:
                todo.append(linked)
    return False


# What databases and the OS say when a write cannot get space (SQLite, PostgreSQL, errno).
WRITE_FAILURE_TEXTS = (
    "database or disk is full",
    "could not extend file",
    "no space left on device",
    "disk quota exceeded",
    "file too large",
)
# PostgreSQL's SQLSTATE class 53, "insufficient resources": disk_full.
DISK_FULL_SQLSTATES = {"53100"}
WRITE_FAILURE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def write_failure(exc: BaseException) -> str | None:
    """The named cause when ``exc`` (or what caused it) is a write refused for want of space,
    a fault that waiting (and an operator) fixes rather than a bug; else None."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        error = todo.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        text = str(error).lower()
        sqlstate = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        if isinstance(error, OSError) and error.errno in WRITE_FAILURE_ERRNOS:
            return f"disk full ({type(error).__name__}: {_first_line(error)})"
        if sqlstate in DISK_FULL_SQLSTATES or (
            isinstance(error, DatabaseError) and any(t in text for t in WRITE_FAILURE_TEXTS)
        ):
            return f"the database cannot write ({type(error).__name__}: {_first_line(error)})"
        if isinstance(error, BaseExceptionGroup):
            todo.extend(error.exceptions)
        for linked in (error.__cause__, error.__context__):
            if linked is not None:
                todo.append(linked)
    return None


def piece_max_requeues() -> int:
    return int(getattr(settings, "RUN_PIECE_MAX_REQUEUES", 10))


def piece_give_up(*, piece: RunPiece, reason: str, expect: Q) -> bool:
    """Fail a piece handed out ``RUN_PIECE_MAX_REQUEUES`` times already, and its run, with
    ``reason`` as the cause; False when the piece moved on meanwhile (``expect`` no longer
    holds)."""
    from benchmarks_app.services.run_state import pieces_calls_mark_lost, run_fail

    cause = (
        f"piece {piece.key or 'all'} was re-queued {piece.requeues} times "
        f"(RUN_PIECE_MAX_REQUEUES={piece_max_requeues()}); last cause: {reason}"
    )
    with transaction.atomic():
        if not RunPiece.objects.filter(Q(pk=piece.pk) & expect).update(
            status=PieceStatus.FAILED,
            lease_expires_at=None,
            retry_at=None,
            finished_at=Now(),
            error=cause[:10000],
        ):
            return False
        # Its holders are gone (or give up): what they left in flight is settled too.
        pieces_calls_mark_lost(pieces=[(piece.pk, piece.attempt)], reason="re-queue cap")
        run_fail(run_id=piece.run_id, error=f"Run failed: {cause}.")
    logger.error("run #%s: %s; the run fails", piece.run_id, cause)
    return True


def piece_requeue_after_database_loss(*, piece: RunPiece, error: BaseException) -> bool:
    """Reconnect and queue ``piece`` (held by this worker) again; True once queued or failed
    at the cap, False when the database stayed down or the piece was taken over meanwhile."""
    reason = f"lost the database connection ({type(error).__name__}: {_first_line(error)})"
    logger.warning("run #%s piece %r: %s; re-queuing it", piece.run_id, piece.key, reason)
    ours = Q(status=PieceStatus.RUNNING, attempt=piece.attempt)
    for delay in RECONNECT_DELAYS_S:
        time.sleep(delay)
        # The old connection is dead; the next query opens a new one. (Inside a caller's
        # transaction, a test's, there is nothing to reopen: closing would only break it.)
        if not connection.in_atomic_block:
            connection.close()
        try:
            current = RunPiece.objects.filter(pk=piece.pk).values_list("requeues", flat=True)
            requeues = current.first()
            if requeues is None:
                return False
            if requeues >= piece_max_requeues():
                piece.requeues = requeues
                return piece_give_up(piece=piece, reason=reason, expect=ours)
            with transaction.atomic():
                if not RunPiece.objects.filter(Q(pk=piece.pk) & ours).update(
                    status=PieceStatus.QUEUED,
                    lease_expires_at=None,
                    error=reason[:10000],
                    requeues=F("requeues") + 1,
                ):
                    return False  # the sweeper already gave it to someone else
                _calls_interrupted(piece, reason)
            piece.refresh_from_db()
            piece_send(piece=piece)
            return True
        except DatabaseError:
            logger.warning("run #%s: the database is still unreachable", piece.run_id)
    logger.error(
        "run #%s piece %r: the database stayed unreachable; the sweeper re-queues the piece "
        "when its lease expires",
        piece.run_id,
        piece.key,
    )
    return False


def _calls_interrupted(piece: RunPiece, reason: str) -> int:
    """The calls this attempt had in flight were cut by a fault, not cancelled."""
    from benchmarks_app.services.judging import judge_calls_interrupt
    from benchmarks_app.services.leases import lease_holder

    return judge_calls_interrupt(holder=lease_holder(piece), reason=reason)


def piece_park_after_write_failure(*, piece: RunPiece, cause: str) -> bool:
    """End this attempt of ``piece`` (held here) for a write that failed for want of space:
    its calls in flight interrupted, the piece parked (``waiting``, retried after
    ``RUN_PARK_RETRY_S`` as the sweeper retries pieces parked on a down judge) and its run
    ``waiting`` with the cause. False when even that could not be written (a database that
    refuses every write): the lease then runs out and the sweeper hands the piece out."""
    from benchmarks_app.services.leases import piece_end

    error = f"{WRITE_FAILURE_PREFIX}{cause}"
    logger.error("run #%s piece %r: %s; parking it", piece.run_id, piece.key or "all", error)
    try:
        _calls_interrupted(piece, cause)
        if not piece_end(piece=piece, status=PieceStatus.WAITING, error=error):
            return False
        piece_park(piece=piece)
        EvaluationRun.objects.filter(pk=piece.run_id, status__in=ACTIVE_STATUSES).update(
            status=RunStatus.WAITING,
            error=f"Waiting for storage: {cause}"[:10000],
            updated_at=Now(),
        )
    except DatabaseError:
        logger.exception("run #%s: could not park the piece after a write failure", piece.run_id)
        return False
    return True


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else "no message"


def park_seconds() -> float:
    return float(getattr(settings, "RUN_PARK_RETRY_S", 60))


def piece_park(*, piece: RunPiece) -> None:
    """Give a paused (``waiting``) piece its retry time: the sweeper leaves it until then."""
    RunPiece.objects.filter(pk=piece.pk, status=PieceStatus.WAITING).update(
        retry_at=database_time_in(park_seconds())
    )


def judge_peers(run: EvaluationRun) -> Q:
    """The pieces that ask the same judge as ``run``'s: its own, and those of every active run
    made with the same judge record (runs without one, replays, share only their own)."""
    same = Q(run_id=run.pk)
    if run.judge_record_id is not None:
        same |= Q(run__judge_record_id=run.judge_record_id, run__status__in=ACTIVE_STATUSES)
    return same


def judge_group(run: EvaluationRun) -> tuple[str, int]:
    """A key naming the judge ``run`` asks (see :func:`judge_peers`)."""
    if run.judge_record_id is not None:
        return ("record", int(run.judge_record_id))
    return ("run", int(run.pk))


def piece_park_beside_sibling(*, piece: RunPiece) -> bool:
    """Park a piece just claimed when a piece asking the same judge (of its run, or of any
    active run made with the same judge record) is parked on it: the judge is down, and
    asking it again would hold this worker for another ``JUDGE_OUTAGE_PATIENCE_S``. True
    when parked (the worker has nothing to do)."""
    if piece.run.status not in ACTIVE_STATUSES:
        return False  # an ended run's piece is failed by the caller, not parked
    now = database_now()
    parked = (
        RunPiece.objects.filter(
            judge_peers(piece.run), status=PieceStatus.WAITING, retry_at__gt=now
        )
        .exclude(pk=piece.pk)
        .order_by("-retry_at")
        .first()
    )
    if parked is None:
        return False
    taken = RunPiece.objects.filter(
        pk=piece.pk, attempt=piece.attempt, status=PieceStatus.RUNNING
    ).update(
        status=PieceStatus.WAITING,
        lease_expires_at=None,
        retry_at=parked.retry_at,
        error=parked.error,
        judge_outage=parked.judge_outage,  # since when the judge is down, for the run's page
    )
    if taken:
        run_update: dict[str, object] = {"status": RunStatus.WAITING, "updated_at": now}
        if parked.run_id != piece.run_id:
            # This run's page says why it waits: another run found the judge down.
            run_update["error"] = (
                f"Waiting for the judge: {parked.error or 'it is down'} "
                f"(found by run #{parked.run_id})"
            )[:10000]
        EvaluationRun.objects.filter(pk=piece.run_id, status__in=ACTIVE_STATUSES).update(
            **run_update
        )
        logger.info(
            "run #%s piece %r parked beside run #%s piece %r until the judge is tried again",
            piece.run_id,
            piece.key,
            parked.run_id,
            parked.key,
        )
    return bool(taken)


def run_parked_beside_until(run: EvaluationRun) -> Any:
    """When ``run`` waits because another run found its judge down: the time that judge is
    tried again (a parked piece's ``retry_at``), else None."""
    if run.judge_record_id is None:
        return None
    return (
        RunPiece.objects.filter(judge_peers(run), status=PieceStatus.WAITING, retry_at__gt=Now())
        .exclude(run_id=run.pk)
        .order_by("-retry_at")
        .values_list("retry_at", flat=True)
        .first()
    )
