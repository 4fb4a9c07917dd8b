"""The order in which queued run pieces are taken: fair across submitters.

The broker hands out tasks first in, first out, and a process that takes a run's piece drives
up to ``RUN_PIECES_PER_PROCESS`` pieces: one user's large runs queued first held every worker
while other users' one-repo runs waited behind all of their pieces. A worker with a free slot
takes instead the queued piece whose submitter is served least: fewest pieces running now,
then the longest since one of their pieces started (never first), then the oldest queued.
Round-robin by submitting user, read from the database: the same for every worker of every
cluster, with either broker.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import Count, Max, Q

from benchmarks_app.models import PieceStatus, RunPiece
from benchmarks_app.models.runs import ACTIVE_STATUSES

# Queued pieces looked at per pick: the oldest of each submitter are among them unless one
# submitter has more queued than this (then the others' are still found on later picks).
FAIR_WINDOW = 500

_NEVER = datetime.min.replace(tzinfo=UTC)


def queued_pieces_fair_order(*, limit: int = FAIR_WINDOW) -> list[int]:
    """Ids of queued pieces of active runs, the one to take first first."""
    active = RunPiece.objects.filter(run__status__in=ACTIVE_STATUSES)
    candidates = list(
        active.filter(status=PieceStatus.QUEUED)
        .order_by("enqueued_at", "pk")
        .values_list("pk", "run__created_by_id")[:limit]
    )
    if len({user for _, user in candidates}) < 2:
        return [pk for pk, _ in candidates]
    served = {
        row["run__created_by_id"]: (row["running"], row["last_start"] or _NEVER)
        for row in active.exclude(status=PieceStatus.QUEUED)
        .order_by()
        .values("run__created_by_id")
        .annotate(
            running=Count("pk", filter=Q(status=PieceStatus.RUNNING)),
            last_start=Max("started_at"),
        )
    }
    # A stable sort: within a submitter, and among equals, the oldest queued stays first.
    ordered = sorted(candidates, key=lambda c: served.get(c[1], (0, _NEVER)))
    return [pk for pk, _ in ordered]
