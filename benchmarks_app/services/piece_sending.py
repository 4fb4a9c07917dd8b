"""A run's pieces cut and handed to the queue: prepared (created, or queued again on a resume),
sent to django-q2 with the time they were sent (the sweeper resends what was lost), and the
test of a run that nobody is working on.

The lowest of the run-scheduling modules: :mod:`.scheduling` (claims and drives pieces),
:mod:`.run_recovery` (queues a piece again after a lost database) and :mod:`.sweeper` all
send pieces through this module, which imports none of them.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Now

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.services.leases import database_now
from benchmarks_app.services.queue_canary import queue_canary_write
from benchmarks_app.services.run_state import run_piece_weights, run_plan

# The queue task that processes one piece of a run (and more of the same run, see above).
PIECE_TASK = "benchmarks_app.tasks.runs.process_run_piece"


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
        RunPiece.objects.filter(pk__in=[p.pk for p in pieces]).update(enqueued_at=Now())
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
    now = database_now()
    weights = run_piece_weights(run)
    # Heaviest first (created in that order, so in the order the queue's workers claim them):
    # the run is as long as its longest piece, which must not wait behind the short ones.
    keys = sorted(run_plan(run) or [""], key=lambda key: -weights.get(key, 1))
    for key in keys:
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
    now = database_now()
    grace = timedelta(seconds=float(getattr(settings, "RUN_PICKUP_GRACE_S", 30)))
    pieces = RunPiece.objects.filter(run=run)
    live = pieces.filter(status=PieceStatus.RUNNING, lease_expires_at__gte=now).exists()
    fresh = pieces.filter(status=PieceStatus.QUEUED, enqueued_at__gte=now - grace).exists()
    return not live and not fresh
