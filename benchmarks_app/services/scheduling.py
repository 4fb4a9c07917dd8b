"""A run's pieces: cut, sent to the queue, claimed and processed, several at a time.

A run is split into pieces (:class:`~benchmarks_app.models.RunPiece`): one per repo for the
audit benchmark, one for the whole run otherwise. Each piece is held under a lease of its own
(:mod:`.leases`), so no task comes near ``Q_TIMEOUT``, a crash redoes one piece at most, and
another machine can take any piece nobody holds. The run ends when its last piece does; the
sweeper (:mod:`.sweeper`) hands out again what nobody is doing.

A process that takes a run's piece (a queue worker's task, or ``run_wait`` with no worker)
also claims up to ``RUN_PIECES_PER_PROCESS - 1`` more queued pieces of the same run and drives
them side by side, one thread each: a run's chain of dependent judge rounds is then its
longest repo's, not the sum of its repos'. Their judge calls share the process's one gate per
endpoint (``JUDGE_CONCURRENCY``; :class:`scoring.judges.limits.CallGate`).

Imports point one way: :mod:`.runs` → :mod:`.sweeper` → this module → :mod:`.run_state` →
:mod:`.leases`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.services.leases import (
    LeaseKeeper,
    LeaseLost,
    RunCancelled,
    holding,
    lease_holder,
    piece_claim,
    piece_end,
)
from benchmarks_app.services.queue_canary import queue_canary_write
from benchmarks_app.services.run_recovery import (
    database_lost,
    piece_park,
    piece_park_beside_sibling,
    piece_requeue_after_database_loss,
)
from benchmarks_app.services.run_state import (
    RUN_KINDS,
    run_fail,
    run_finish_if_last,
    run_plan,
    run_start,
)
from scoring.judges.failures import JudgeUnavailable
from scoring.judges.llm import client_warm_up

logger = logging.getLogger(__name__)

# The queue task that processes one piece of a run (and more of the same run, see above).
PIECE_TASK = "benchmarks_app.tasks.runs.process_run_piece"


def pieces_per_process() -> int:
    return max(1, int(getattr(settings, "RUN_PIECES_PER_PROCESS", 16)))


def piece_send(*, piece: RunPiece) -> None:
    """Give one piece to the queue and note when (the sweeper resends lost ones)."""
    pieces_send(pieces=[piece])


def pieces_send(*, pieces: list[RunPiece]) -> None:
    """Give pieces to the queue and note when, in one transaction where the queue is a real one.

    One transaction, not three commits per piece: django-q2's ORM broker also closes and
    reopens the connection around each task it queues outside a transaction (a run of eleven
    pieces took 0.3-0.4 s to queue before a worker could start). The synchronous queue runs
    each task as it is queued, and a task must not run inside the caller's transaction.
    """
    from django_q.tasks import async_task

    if not pieces:
        return
    queue_canary_write()  # so that a cluster with another SECRET_KEY can tell
    together = (
        transaction.atomic() if not settings.Q_CLUSTER.get("sync") else contextlib.nullcontext()
    )
    with together:
        RunPiece.objects.filter(pk__in=[p.pk for p in pieces]).update(enqueued_at=timezone.now())
        for piece in pieces:
            label = f"{piece.run.benchmark}-run-{piece.run_id}" + (
                f"-{piece.key}" if piece.key else ""
            )
            task_id = str(async_task(PIECE_TASK, piece.pk, task_name=label[:100]) or "")[:64]
            # In sync mode the task has already run; keep the id for the admin and the sweeper.
            RunPiece.objects.filter(pk=piece.pk).update(task_id=task_id)
            EvaluationRun.objects.filter(pk=piece.run_id).update(task_id=task_id)


def run_pieces_prepare(*, run: EvaluationRun) -> list[RunPiece]:
    """The run's pieces still to do, each ``queued`` (created on the first call).

    On a resumed run what ended (or paused) is queued again; a piece somebody holds under a
    live lease is left to them. Each is stamped as queued now: the sweeper leaves it to
    whoever is sending it (``RUN_PICKUP_GRACE_S``) instead of sending it a second time.
    """
    pieces = []
    now = timezone.now()
    for key in run_plan(run) or [""]:
        piece, created = RunPiece.objects.get_or_create(
            run=run, key=key, defaults={"enqueued_at": now}
        )
        if not created:
            RunPiece.objects.filter(pk=piece.pk).exclude(
                status=PieceStatus.RUNNING, lease_expires_at__gte=now
            ).update(status=PieceStatus.QUEUED, error="", finished_at=None, enqueued_at=now)
            piece.refresh_from_db()
        if piece.status == PieceStatus.QUEUED:
            pieces.append(piece)
    return pieces


def run_enqueue(*, run: EvaluationRun) -> None:
    """Cut the run into pieces and hand them to django-q2 once the transaction has committed."""
    run_id = run.pk

    def _send() -> None:
        pieces_send(pieces=run_pieces_prepare(run=EvaluationRun.objects.get(pk=run_id)))

    transaction.on_commit(_send)


def run_is_stalled(run: EvaluationRun) -> bool:
    """An active run that nobody is working on: no piece under a live lease, none queued
    recently (its worker died before the sweeper noticed, or the queue lost its tasks)."""
    if run.status not in ACTIVE_STATUSES:
        return False
    now = timezone.now()
    grace = timedelta(seconds=float(getattr(settings, "RUN_PICKUP_GRACE_S", 30)))
    pieces = RunPiece.objects.filter(run=run)
    live = pieces.filter(status=PieceStatus.RUNNING, lease_expires_at__gte=now).exists()
    fresh = pieces.filter(status=PieceStatus.QUEUED, enqueued_at__gte=now - grace).exists()
    return not live and not fresh


def live_clusters() -> list[Any]:
    """The qcluster processes django-q2 knows to be alive (their stats expire in seconds)."""
    from django_q.status import Stat

    try:
        return [
            stat
            for stat in Stat.get_all()
            # Only clusters' own stats: anything else a broker lists there is not a worker.
            if getattr(stat, "cluster_id", None) and getattr(stat, "status", "") != "Stopped"
        ]
    except Exception:  # a broker without stats: nobody known to be there
        logger.debug("no cluster stats", exc_info=True)
        return []


# --- processing -------------------------------------------------------------------------------


def piece_process(*, piece_id: int) -> None:
    """The queue task: claim this piece and up to ``RUN_PIECES_PER_PROCESS - 1`` more queued
    pieces of its run, and process them side by side (each under its own lease).

    A second delivery of a task finds its piece held or done and returns. A piece's error
    is recorded on the run and raised here (django-q2 records the task as failed).
    """
    piece = piece_claim(piece_id=piece_id)
    if piece is None:
        return
    more = list(
        RunPiece.objects.filter(run_id=piece.run_id, status=PieceStatus.QUEUED)
        .exclude(pk=piece.pk)
        .order_by("pk")
        .values_list("pk", flat=True)[: pieces_per_process() - 1]
    )
    _drive(piece, more, raise_errors=True)


def run_process_here(*, run: EvaluationRun, raise_errors: bool = False, processes: int = 1) -> None:
    """Process every piece of ``run`` that nobody holds, here (no queue needed),
    ``RUN_PIECES_PER_PROCESS`` at a time per process.

    ``processes`` above 1 (``run_wait`` with no worker: ``RUN_PROCESSES_HERE``) forks helpers
    that take their share of the pieces, each piece still claimed under its own lease: one
    Python process holds one GIL, and eleven pieces' judge calls kept one core busy while the
    other idled (a default cluster runs two workers). A helper that dies leaves its pieces'
    leases to expire, and the caller takes them up again. A piece's error is recorded on the
    run by :func:`piece_run`; ``raise_errors`` passes it on too (a queue task, so that
    django-q2 records the task as failed).
    """
    ids = list(
        RunPiece.objects.filter(
            run=run, status__in=[PieceStatus.QUEUED, PieceStatus.WAITING]
        ).values_list("pk", flat=True)
    )
    helpers = min(processes, len(ids)) - 1
    if helpers < 1 or not hasattr(os, "fork") or transaction.get_connection().in_atomic_block:
        _drive(None, ids, raise_errors=raise_errors)
        return
    process_warm_up()  # once, before the fork: the helpers start with it done
    # No connection crosses the fork (each process opens its own); unwritten output neither.
    connections.close_all()
    sys.stdout.flush()
    sys.stderr.flush()
    children = []
    for helper in range(1, helpers + 1):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the helper's exit status is checked by the caller
            status = 0
            try:
                _drive(None, ids[helper :: helpers + 1], raise_errors=False)
            except BaseException:
                logger.exception("run #%s: a helper process failed", run.pk)
                status = 1
            finally:
                connections.close_all()
                os._exit(status)
        children.append(pid)
    try:
        _drive(None, ids[:: helpers + 1], raise_errors=raise_errors)
    finally:
        for pid in children:
            _, status = os.waitpid(pid, 0)
            if status:
                logger.warning(
                    "run #%s: helper process %s ended with status %s", run.pk, pid, status
                )


def run_process_all(*, run_id: int) -> None:
    """Process a whole run in this process (tasks queued before runs were cut into pieces)."""
    run = EvaluationRun.objects.get(pk=run_id)
    if run.status in ACTIVE_STATUSES:
        run_pieces_prepare(run=run)
        run_process_here(run=run, raise_errors=True)


_warmed = threading.Event()
GIL_SWITCH_S = 0.001


def process_warm_up() -> None:
    """Once per process, before it drives pieces: hand the GIL over sooner, load the judges'
    client library, then take what start-up allocated out of the cyclic garbage collector's
    sight (``gc.freeze``).

    Every piece's judge imports the client library (openai: about 0.4 CPU-s) when it is
    built; eleven pieces building theirs at once queue on the import lock and on the GIL while
    no call goes out. And a full collection walks every object alive (Django, the client
    library's types: about 0.15 s each under load, five per audit run) while every piece's
    loop stands still; start-up objects live for the process anyway. Frozen objects are still
    freed when nothing refers to them; only cycles made before the freeze are kept.
    """
    if _warmed.is_set():
        return
    # The pieces' loops, their database threads and lease keepers are many threads that
    # mostly wait; one that wakes (an answer came, a write committed) waited up to the
    # default 5 ms for the GIL at each hand-over, four or more per judge call on a repo's
    # chain. A shorter interval costs the process a little throughput, not latency.
    sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))
    # Frozen first too: the import's own collections then walk only what it creates.
    gc.freeze()
    client_warm_up()
    gc.freeze()
    _warmed.set()


def _drive(first: RunPiece | None, piece_ids: list[int], *, raise_errors: bool) -> None:
    """Process ``first`` (claimed already) and claim and process ``piece_ids``, side by side.

    One thread per piece, each with its own database connection, at most
    ``RUN_PIECES_PER_PROCESS`` at once. Inside a transaction (a test, a script that has not
    committed) the pieces run one after another on this thread: another connection would not
    see the rows they need.
    """
    errors: list[BaseException] = []
    if first is not None or piece_ids:
        process_warm_up()

    def claim_and_run(piece_id: int) -> None:
        piece = piece_claim(piece_id=piece_id)
        if piece is not None:
            piece_run(piece)

    jobs: list[Callable[[], None]] = []
    if first is not None:
        jobs.append(functools.partial(piece_run, first))
    jobs += [functools.partial(claim_and_run, pk) for pk in piece_ids]

    def guarded(job: Callable[[], None], *, own_connection: bool) -> None:
        try:
            job()
        except Exception as exc:
            errors.append(exc)
            logger.debug("a run piece failed", exc_info=True)
        finally:
            if own_connection:
                connections.close_all()

    if len(jobs) == 1 or transaction.get_connection().in_atomic_block:
        for job in jobs:
            guarded(job, own_connection=False)
    else:
        width = min(pieces_per_process(), len(jobs))
        pending = list(jobs)
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    if not pending:
                        return
                    job = pending.pop(0)
                guarded(job, own_connection=False)

        def thread_main() -> None:
            try:
                worker()
            finally:
                connections.close_all()

        threads = [
            threading.Thread(target=thread_main, name=f"run-piece-{i}", daemon=True)
            for i in range(width)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors and raise_errors:
        raise errors[0]


def piece_run(piece: RunPiece) -> None:
    """Process a claimed piece under a renewed lease, and end the run if it was the last.

    A judge that stays down past its patience pauses the piece (and the run, "waiting for
    judge") for the sweeper to hand out again; a lease taken over drops this worker's writes;
    a cancelled run stops the piece (calls in flight abandoned, what was judged kept); any
    other error fails the run with its message (a resume redoes what is missing).
    """
    run = piece.run
    if piece_park_beside_sibling(piece=piece):
        return
    if not run_start(run.pk):
        run.refresh_from_db()
        piece_end(piece=piece, status=PieceStatus.FAILED, error=f"run is {run.status}")
        return
    if piece.attempt > 1:
        _mark_lost_calls(piece)
    run.refresh_from_db()
    kind = RUN_KINDS[run.benchmark]
    keeper = LeaseKeeper(piece)
    keeper.start()
    try:
        with holding(piece, cancelled=keeper.cancelled):
            if kind.plan:
                import_string(kind.process)(run, piece.key)
            else:
                import_string(kind.process)(run)
            keeper.stop()
            if keeper.lost.is_set():
                raise LeaseLost(f"piece {piece.pk}: lease lost while processing")
            if piece_end(piece=piece, status=PieceStatus.DONE):
                run_finish_if_last(run.pk, kind)
    except LeaseLost as exc:
        logger.warning("run #%s: %s; the new holder carries on", run.pk, exc)
    except RunCancelled:
        _stop_cancelled(piece)
    except JudgeUnavailable as exc:
        _pause(piece, str(exc))
    except Exception as exc:
        if database_lost(exc):
            # A restart or fail-over of the database is transient: nothing failed.
            piece_requeue_after_database_loss(piece=piece, error=exc)
            return
        if EvaluationRun.objects.filter(pk=run.pk, status=RunStatus.CANCELLED).exists():
            # An error on the way out of a cancelled run (a write refused, a call cut short).
            _stop_cancelled(piece)
            return
        message = f"{type(exc).__name__}: {exc}"
        logger.error("run #%s failed (piece %r): %s", run.pk, piece.key or "all", message)
        with holding(piece):
            try:
                run_fail(run_id=run.pk, error=message)
            except LeaseLost:
                return
        piece_end(piece=piece, status=PieceStatus.FAILED, error=message)
        raise
    finally:
        keeper.stop()


def _stop_cancelled(piece: RunPiece) -> None:
    """The run was cancelled: this piece's calls still in flight are abandoned, it ends."""
    from benchmarks_app.services.judging import judge_calls_abandon

    abandoned = judge_calls_abandon(holder=lease_holder(piece))
    piece_end(piece=piece, status=PieceStatus.FAILED, error="run cancelled")
    logger.info(
        "run #%s piece %r stopped: the run was cancelled (%s call(s) abandoned in flight)",
        piece.run_id,
        piece.key or "all",
        abandoned,
    )


def _mark_lost_calls(piece: RunPiece) -> None:
    """Judge calls a dead holder of this piece left in flight are recorded as lost."""
    from benchmarks_app.models import JudgeInFlight
    from benchmarks_app.services.judging import judge_calls_mark_lost

    for attempt in range(1, piece.attempt):
        holder = lease_holder(RunPiece(pk=piece.pk, attempt=attempt))
        judge_calls_mark_lost(holder=holder)
        # Its questions are nobody's now: let the new holder ask them instead of waiting for
        # the dead asker's in-flight rows to expire.
        JudgeInFlight.objects.filter(holder__startswith=f"{holder}#").delete()


def _pause(piece: RunPiece, reason: str) -> None:
    if not piece_end(piece=piece, status=PieceStatus.WAITING, error=reason):
        return
    piece_park(piece=piece)
    EvaluationRun.objects.filter(pk=piece.run_id, status__in=ACTIVE_STATUSES).update(
        status=RunStatus.WAITING,
        error=f"Waiting for the judge: {reason}"[:10000],
        updated_at=timezone.now(),
    )
    logger.warning(
        "run #%s paused, waiting for the judge (piece %r): %s",
        piece.run_id,
        piece.key or "all",
        reason,
    )
