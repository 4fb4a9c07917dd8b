"""An operator sees trouble on the run's page and in the admin: a run stuck past
``RUN_STUCK_AFTER_S``, a piece no worker has picked up, and every piece with its lease."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus

pytestmark = pytest.mark.django_db


def _stuck_and_fresh() -> tuple[EvaluationRun, EvaluationRun]:
    stuck = EvaluationRun.objects.create(benchmark="probes", judge="rules", status="running")
    fresh = EvaluationRun.objects.create(benchmark="probes", judge="rules", status="running")
    EvaluationRun.objects.filter(pk=stuck.pk).update(updated_at=timezone.now() - timedelta(hours=3))
    return stuck, fresh


def test_the_run_page_flags_a_stuck_run_and_a_piece_nobody_picked_up(admin_client: Client) -> None:
    stuck, fresh = _stuck_and_fresh()
    RunPiece.objects.create(
        run=stuck,
        key="repo-7",
        status=PieceStatus.QUEUED,
        requeues=2,
        enqueued_at=timezone.now() - timedelta(seconds=913),
    )
    page = admin_client.get(f"/runs/{stuck.pk}/").content.decode()
    assert 'data-role="stuck"' in page and "for over 1800 s" in page
    # 913 s when the page is rendered, give or take the test's own slowness.
    assert re.search(r"Piece repo-7 has not been picked up by any worker for 91\d s", page)
    assert "(sent 2 more times)" in page
    calm = admin_client.get(f"/runs/{fresh.pk}/").content.decode()
    assert 'data-role="stuck"' not in calm and 'data-role="unpicked"' not in calm
    # An ended run is never flagged, however old.
    EvaluationRun.objects.filter(pk=stuck.pk).update(status=RunStatus.FAILED)
    ended = admin_client.get(f"/runs/{stuck.pk}/").content.decode()
    assert 'data-role="stuck"' not in ended and 'data-role="unpicked"' not in ended


def test_the_admin_filters_stuck_runs_and_lists_pieces_with_their_leases(
    admin_client: Client,
) -> None:
    stuck, fresh = _stuck_and_fresh()
    listed = admin_client.get("/admin/benchmarks_app/evaluationrun/?stuck=yes")
    runs = [run.pk for run in listed.context["cl"].result_list]
    assert runs == [stuck.pk]
    RunPiece.objects.create(
        run=fresh,
        status=PieceStatus.RUNNING,
        attempt=2,
        requeues=1,
        worker="host-a:10/11",
        lease_expires_at=timezone.now() + timedelta(seconds=60),
    )
    pieces = admin_client.get("/admin/benchmarks_app/runpiece/?status=running")
    assert [p.worker for p in pieces.context["cl"].result_list] == ["host-a:10/11"]
    assert "host-a:10/11" in pieces.content.decode()
