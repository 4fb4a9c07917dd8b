"""The sweeper: hands out again what no live worker is doing.

Run by a django-q2 schedule (every minute: django-q2's finest schedule) and, for the runs
someone is waiting on, by ``run_wait``. It re-queues

* pieces whose lease expired (their worker died, or was killed past ``Q_TIMEOUT``);
* pieces paused while the judge was down (``waiting``): one per judge tries it again at the
  retry time, the others once it has answered (:func:`_resume_parked`);
* queued pieces whose task is no longer waiting in the broker and that nobody picked up within
  ``RUN_PICKUP_GRACE_S`` (the Redis broker forgets a task once a cluster has taken it, so a
  cluster killed with tasks in its local queue loses them; a busy cluster's prefetched task is
  also sent again, so that an idle cluster can take it — the claim makes the second delivery
  harmless);
* runs whose every piece has ended but that were never finished (their last worker died in
  between).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F, Q
from django.utils import timezone

from benchmarks_app.models import (
    EvaluationRun,
    JudgeCall,
    JudgeInFlight,
    PieceStatus,
    RunPiece,
    RunStatus,
)
from benchmarks_app.models.judging import JudgeCallStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.services.leases import database_now, lease_holder, worker_clock_record
from benchmarks_app.services.piece_sending import piece_send
from benchmarks_app.services.run_recovery import (
    judge_group,
    judge_peers,
    park_seconds,
    piece_give_up,
    piece_max_requeues,
)
from benchmarks_app.services.run_state import (
    RUN_KINDS,
    pieces_calls_mark_lost,
    run_finish_if_last,
    run_pieces_settle,
)

logger = logging.getLogger(__name__)

SWEEP_TASK = "benchmarks_app.tasks.runs.sweep_runs"
SWEEP_SCHEDULE_NAME = "evalplatform: re-queue stalled runs"


@dataclass
class SweepReport:
    expired: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    finished_runs: list[int] = field(default_factory=list)
    # Pieces of ended runs that nobody holds any more, ended too (their pending calls lost).
    settled: int = 0

    def __str__(self) -> str:
        return (
            f"{len(self.expired)} expired lease(s), {len(self.waiting)} paused, "
            f"{len(self.lost)} lost task(s) re-queued; {len(self.finished_runs)} run(s) ended"
            + (f"; {self.settled} piece(s) of ended runs settled" if self.settled else "")
        )


def waiting_task_ids() -> set[str] | None:
    """Ids of the tasks waiting in the broker (not yet taken by a cluster); None if unknown."""
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    try:
        broker = get_broker()
        payloads: Iterable[Any]
        if settings.Q_CLUSTER.get("redis"):
            payloads = broker.connection.lrange(broker.list_key, 0, -1)
        else:
            from django_q.models import OrmQ

            # The ORM broker keeps a taken task, locked until Q_RETRY, and redelivers it then.
            payloads = OrmQ.objects.filter(
                key=broker.list_key, lock__lte=timezone.now()
            ).values_list("payload", flat=True)
        ids = set()
        for payload in payloads:
            try:
                ids.add(str(SignedPackage.loads(payload)["id"]))
            except Exception:  # another app's task, or signed with another key
                continue
        return ids
    except Exception:
        logger.warning("the sweeper could not read the broker's queue", exc_info=True)
        return None


def _requeue(
    piece: RunPiece, *, reason: str, expect: Q, counts: bool = True, holder_dead: bool = False
) -> bool:
    """Queue ``piece`` again; ``counts``: towards ``RUN_PIECE_MAX_REQUEUES`` (expired leases
    do; judge pauses and resent tasks do not). Past the cap the piece and its run fail with
    ``reason`` as the cause. ``holder_dead`` (an expired lease): the calls its holders left
    in flight are recorded ``lost`` now, in the same transaction, and their questions are
    freed for other askers, rather than once a worker takes the piece again (a queue of
    other runs, or no live cluster, could leave them pending and held meanwhile)."""
    if counts and piece.requeues >= piece_max_requeues():
        piece_give_up(piece=piece, reason=reason, expect=expect)
        return False
    with transaction.atomic():
        if not RunPiece.objects.filter(Q(pk=piece.pk) & expect).update(
            status=PieceStatus.QUEUED,
            lease_expires_at=None,
            retry_at=None,
            error=reason[:10000],
            requeues=F("requeues") + (1 if counts else 0),
        ):
            return False  # somebody else moved it meanwhile
        if holder_dead:
            _dead_holder_settle(piece, reason)
        EvaluationRun.objects.filter(pk=piece.run_id, status=RunStatus.WAITING).update(
            status=RunStatus.QUEUED
        )
    piece.refresh_from_db()
    piece_send(piece=piece)
    return True


def _dead_holder_settle(piece: RunPiece, reason: str) -> None:
    """``lost``, not ``interrupted``: nobody cut these calls short and recorded it (a worker
    that survives a fault does that itself); whether the judge answered, and billed, is not
    known."""
    pieces_calls_mark_lost(pieces=[(piece.pk, piece.attempt)], reason=reason)
    JudgeInFlight.objects.filter(holder__startswith=f"{lease_holder(piece)}#").delete()


def _resume_parked(pieces: Any, *, now: Any, report: SweepReport) -> None:
    """Pieces parked on a down judge, judge by judge (:func:`judge_group`): all of them go
    back to the queue once the judge has answered any of its runs since they were parked;
    otherwise, when their retry time has come, one of them tries the judge (the probe) while
    the others wait behind it, for the probe's answer or for its own parking."""
    waiting = list(pieces.filter(status=PieceStatus.WAITING))
    groups: dict[tuple[str, int], list[RunPiece]] = defaultdict(list)
    for piece in waiting:
        groups[judge_group(piece.run)].append(piece)
    park = timedelta(seconds=park_seconds())
    for group in groups.values():
        peers = judge_peers(group[0].run)
        due = [p for p in group if p.retry_at is None or p.retry_at <= now]
        since = min((p.retry_at - park for p in group if p.retry_at is not None), default=None)
        kind, key = judge_group(group[0].run)
        calls = JudgeCall.objects.filter(
            **({"run__judge_record_id": key} if kind == "record" else {"run_id": key})
        )
        answered = (
            since is not None
            and calls.filter(status=JudgeCallStatus.OK, created_at__gte=since).exists()
        )
        if answered:
            # The judge is back: nobody waits for a retry time, nor is parked beside another.
            due = group
            RunPiece.objects.filter(
                pk__in=[p.pk for p in group], status=PieceStatus.WAITING
            ).update(retry_at=None)
        elif not due:
            continue
        else:
            later = (
                RunPiece.objects.filter(peers, status=PieceStatus.WAITING, retry_at__gt=now)
                .order_by("-retry_at")
                .values_list("retry_at", flat=True)
                .first()
            )
            if later is not None:
                # Another piece found the judge down since: wait beside it.
                RunPiece.objects.filter(
                    pk__in=[p.pk for p in due], status=PieceStatus.WAITING
                ).update(retry_at=later)
                continue
            if RunPiece.objects.filter(
                peers, status__in=[PieceStatus.QUEUED, PieceStatus.RUNNING]
            ).exists():
                # A piece is trying the judge now: wait for its answer (or its parking). The
                # waiting keep a retry time that has passed, so that the trying piece is not
                # parked beside them.
                continue
            due = due[:1]  # the probe; the others wait behind it
        for piece in due:
            if _requeue(piece, reason="", expect=Q(status=PieceStatus.WAITING), counts=False):
                report.waiting.append(piece.pk)
                logger.warning(
                    "run #%s piece %r: asking the judge again%s",
                    piece.run_id,
                    piece.key,
                    " (it has answered since)" if answered else "",
                )


def runs_sweep(*, run_ids: list[int] | None = None) -> SweepReport:
    """One pass over the active runs (or only ``run_ids``); safe to run anywhere, any time."""
    report = SweepReport()
    try:
        worker_clock_record()
    except DatabaseError:  # the sweep itself says whether the database is there
        logger.warning("the sweeper could not measure this host's clock", exc_info=True)
    # The database's clock: the one leases are written by, whatever this worker's says.
    now = database_now()
    pieces = RunPiece.objects.select_related("run").filter(run__status__in=ACTIVE_STATUSES)
    if run_ids is not None:
        pieces = pieces.filter(run_id__in=run_ids)

    for piece in pieces.filter(status=PieceStatus.RUNNING, lease_expires_at__lt=now):
        reason = f"lease of attempt {piece.attempt} expired (worker {piece.worker or '?'})"
        if _requeue(
            piece,
            reason=reason,
            expect=Q(status=PieceStatus.RUNNING, attempt=piece.attempt, lease_expires_at__lt=now),
            holder_dead=True,
        ):
            report.expired.append(piece.pk)
            logger.warning("run #%s piece %r: %s; re-queued", piece.run_id, piece.key, reason)

    _resume_parked(pieces, now=now, report=report)

    # Ended runs' pieces left behind: a holder that died after its run failed (or was
    # cancelled) before it could stop, or pieces queued before the run ended.
    left_behind = (
        RunPiece.objects.exclude(run__status__in=ACTIVE_STATUSES)
        .filter(
            Q(status__in=[PieceStatus.QUEUED, PieceStatus.WAITING])
            | Q(status=PieceStatus.RUNNING, lease_expires_at__lt=now)
        )
        .order_by()
        .values_list("run_id", "run__status")
        .distinct()
    )
    if run_ids is not None:
        left_behind = left_behind.filter(run_id__in=run_ids)
    for run_id, status in list(left_behind):
        report.settled += run_pieces_settle(run_id=run_id, reason=f"run {status}")

    grace = timedelta(seconds=float(getattr(settings, "RUN_PICKUP_GRACE_S", 30)))
    stale_queued = list(
        pieces.filter(status=PieceStatus.QUEUED).filter(
            Q(enqueued_at__lt=now - grace) | Q(enqueued_at__isnull=True)
        )
    )
    if stale_queued:
        waiting = waiting_task_ids()
        for piece in stale_queued:
            if waiting is not None and piece.task_id and piece.task_id in waiting:
                continue  # still in the broker: a worker will get to it
            if _requeue(
                piece,
                reason="its task was lost or held by a busy cluster",
                expect=Q(status=PieceStatus.QUEUED, enqueued_at=piece.enqueued_at),
                # Not counted: a piece waiting behind long ones in a busy cluster's prefetch
                # is resent again and again, and nothing is wrong with it.
                counts=False,
            ):
                report.lost.append(piece.pk)
                logger.warning(
                    "run #%s piece %r: not picked up within %ss; sent again",
                    piece.run_id,
                    piece.key,
                    int(grace.total_seconds()),
                )

    runs = EvaluationRun.objects.filter(
        status__in=[RunStatus.RUNNING, RunStatus.QUEUED], pieces__isnull=False
    ).exclude(pieces__status__in=[PieceStatus.QUEUED, PieceStatus.RUNNING, PieceStatus.WAITING])
    if run_ids is not None:
        runs = runs.filter(pk__in=run_ids)
    for run in runs.distinct():
        run_finish_if_last(run.pk, RUN_KINDS[run.benchmark])
        report.finished_runs.append(run.pk)
        logger.warning("run #%s: every piece had ended; the run is ended now", run.pk)
    return report


def sweep_schedule_ensure() -> None:
    """Create (or update) the django-q2 schedule that runs the sweeper every minute."""
    from django_q.models import Schedule

    minutes = max(1, round(float(getattr(settings, "RUN_SWEEP_S", 60)) / 60))
    Schedule.objects.update_or_create(
        name=SWEEP_SCHEDULE_NAME,
        defaults={
            "func": SWEEP_TASK,
            "schedule_type": Schedule.MINUTES,
            "minutes": minutes,
            "repeats": -1,
        },
    )
