"""``POST /api/runs/<id>/cancel/``: the run's creator or staff, any run that has not ended
(a running one is cancelled mid-run in ``tests/benchmarks_app/queue/test_run_cancel.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks_app.models import PieceStatus, RunPiece, RunStatus
from tests.factories.common import RunFactory, StaffFactory, UserFactory, token_for

pytestmark = pytest.mark.django_db


def _cancel(api: Any, run: Any) -> Any:
    return api.post(f"/api/runs/{run.pk}/cancel/")


def test_the_creator_cancels_a_queued_run_and_its_pieces(api: Any) -> None:
    owner = UserFactory.create()
    run = RunFactory.create(created_by=owner)
    piece = RunPiece.objects.create(run=run, key="", status=PieceStatus.QUEUED)
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_for(owner)}")
    response = _cancel(api, run)
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == RunStatus.CANCELLED
    run.refresh_from_db()
    piece.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.finished_at is not None
    assert piece.status == PieceStatus.FAILED


def test_nobody_else_cancels_and_anonymous_requests_are_refused(api: Any) -> None:
    run = RunFactory.create(created_by=UserFactory.create())
    assert _cancel(api, run).status_code in (401, 403)
    api.force_authenticate(UserFactory.create())
    response = _cancel(api, run)
    assert response.status_code == 403
    assert "creator or staff" in response.json()["detail"]
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED


def test_staff_cancel_a_run_waiting_for_the_judge(api: Any) -> None:
    run = RunFactory.create(created_by=UserFactory.create(), status=RunStatus.WAITING)
    api.force_authenticate(StaffFactory.create())
    assert _cancel(api, run).json()["status"] == RunStatus.CANCELLED


@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED])
def test_a_run_that_has_ended_is_a_conflict_that_says_why(api: Any, status: str) -> None:
    owner = UserFactory.create()
    run = RunFactory.create(created_by=owner, status=status)
    api.force_authenticate(owner)
    response = _cancel(api, run)
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "conflict"
    assert f"Run #{run.pk} is {status}" in body["detail"] and "not ended" in body["detail"]
    run.refresh_from_db()
    assert run.status == status


def test_an_unknown_or_invisible_run_is_404(api: Any) -> None:
    from tests.factories.common import ChecklistRunFactory

    api.force_authenticate(UserFactory.create())
    assert api.post("/api/runs/999999/cancel/").status_code == 404
    hidden = ChecklistRunFactory.create()  # another team's private run
    assert _cancel(api, hidden).status_code == 404
