"""Runs that need an operator's eye: stuck past ``RUN_STUCK_AFTER_S``, pieces nobody took."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece
from benchmarks_app.models.runs import ACTIVE_STATUSES, EvaluationRunQuerySet


def stuck_after_s() -> float:
    return float(getattr(settings, "RUN_STUCK_AFTER_S", 1800))


def stuck_runs(now: datetime | None = None) -> EvaluationRunQuerySet:
    """Active runs with no progress and no lease renewal for ``RUN_STUCK_AFTER_S`` (a live
    worker's lease keeper touches its run every third of a lease, whatever the judge does)."""
    cutoff = (now or timezone.now()) - timedelta(seconds=stuck_after_s())
    return EvaluationRun.objects.filter(status__in=ACTIVE_STATUSES, updated_at__lt=cutoff)


def run_is_stuck(run: EvaluationRun) -> bool:
    return stuck_runs().filter(pk=run.pk).exists()


@dataclass(frozen=True)
class UnpickedPiece:
    key: str
    waiting_s: float
    requeues: int


def pieces_not_picked_up(run: EvaluationRun) -> list[UnpickedPiece]:
    """The run's queued pieces that no worker took within ``RUN_PICKUP_GRACE_S`` of being sent
    (every cluster busy, none running, or one that cannot read the queue)."""
    now = timezone.now()
    grace = timedelta(seconds=float(getattr(settings, "RUN_PICKUP_GRACE_S", 30)))
    pieces = RunPiece.objects.filter(
        run=run, status=PieceStatus.QUEUED, enqueued_at__lt=now - grace
    ).order_by("enqueued_at")
    return [
        UnpickedPiece(
            key=piece.key or "all",
            waiting_s=(now - piece.enqueued_at).total_seconds() if piece.enqueued_at else 0.0,
            requeues=piece.requeues,
        )
        for piece in pieces
    ]
