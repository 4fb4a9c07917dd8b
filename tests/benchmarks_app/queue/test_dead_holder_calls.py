"""The calls a killed worker left in flight are settled when the sweeper takes its piece back
(issue 40): recorded ``lost`` (the outcome for a dead worker's calls: whether the judge
answered, and billed, is unknown; ``interrupted`` is what a worker that survives a fault
records itself, ``abandoned`` a cancel) and their questions freed for other askers, in the
sweep that re-queues the piece, not once some worker takes the piece again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
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
from benchmarks_app.services import sweeper
from benchmarks_app.services.leases import lease_holder


def _call(run: EvaluationRun, holder: str, status: str = JudgeCallStatus.PENDING) -> JudgeCall:
    return JudgeCall.objects.create(
        run=run, judge="openai", prompt_hash="h" * 64, status=status, holder=holder
    )


@pytest.mark.django_db
def test_a_killed_workers_calls_are_settled_when_the_sweeper_requeues_its_piece(
    monkeypatch: Any,
) -> None:
    sent: list[int] = []
    monkeypatch.setattr(sweeper, "piece_send", lambda *, piece: sent.append(piece.pk))
    run = EvaluationRun.objects.create(benchmark="probes", judge="rules", status="running")
    dead = RunPiece.objects.create(
        run=run, key="dead", status=PieceStatus.RUNNING, attempt=2, requeues=1,
        lease_expires_at=timezone.now() - timedelta(seconds=5), worker="dead:1/2",
    )  # fmt: skip
    # A live sibling's call in flight is not the dead worker's: left alone.
    live = RunPiece.objects.create(
        run=run, key="live", status=PieceStatus.RUNNING, attempt=1,
        lease_expires_at=timezone.now() + timedelta(seconds=60), worker="live:3/4",
    )  # fmt: skip
    holder = lease_holder(dead)
    in_flight = _call(run, holder)
    earlier = _call(run, lease_holder(RunPiece(pk=dead.pk, attempt=1)))
    answered = _call(run, holder, JudgeCallStatus.OK)
    sibling = _call(run, lease_holder(live))
    JudgeInFlight.objects.create(
        key="k" * 64, holder=f"{holder}#abc", expires_at=timezone.now() + timedelta(seconds=120)
    )
    JudgeInFlight.objects.create(
        key="l" * 64,
        holder=f"{lease_holder(live)}#def",
        expires_at=timezone.now() + timedelta(seconds=120),
    )

    report = sweeper.runs_sweep()

    assert report.expired == [dead.pk] and dead.pk in sent
    dead.refresh_from_db()
    assert dead.status == PieceStatus.QUEUED and dead.attempt == 2  # nobody took it yet
    status = dict(JudgeCall.objects.filter(run=run).values_list("pk", "status"))
    assert status[in_flight.pk] == JudgeCallStatus.LOST
    assert status[earlier.pk] == JudgeCallStatus.LOST
    assert status[answered.pk] == JudgeCallStatus.OK
    assert status[sibling.pk] == JudgeCallStatus.PENDING
    assert "lease of attempt 2 expired" in JudgeCall.objects.get(pk=in_flight.pk).error
    # The dead asker's question is free at once; the live one's is not.
    assert list(JudgeInFlight.objects.values_list("holder", flat=True)) == [
        f"{lease_holder(live)}#def"
    ]
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
