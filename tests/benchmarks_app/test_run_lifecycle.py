"""The run life cycle shared by all benchmarks: claim, finish, fail, resume, wait."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, RunStatus
from benchmarks_app.services import runs as run_services

pytestmark = pytest.mark.django_db


def _run(**kwargs: Any) -> EvaluationRun:
    return EvaluationRun.objects.create(benchmark="audit", judge="offline", **kwargs)


def test_a_run_is_claimed_once() -> None:
    run = _run()
    first = run_services.run_claim(run_id=run.pk)
    second = run_services.run_claim(run_id=run.pk)
    assert first is not None and first.status == RunStatus.RUNNING and first.attempts == 1
    assert second is None


def test_a_stale_running_run_can_be_claimed_again() -> None:
    run = _run(status=RunStatus.RUNNING)
    EvaluationRun.objects.filter(pk=run.pk).update(
        updated_at=timezone.now() - run_services.STALE_AFTER - timedelta(seconds=5)
    )
    claimed = run_services.run_claim(run_id=run.pk)
    assert claimed is not None and claimed.attempts == 1


def test_finish_with_failed_items_marks_the_run_failed_and_incomplete() -> None:
    run = run_services.run_claim(run_id=_run().pk)
    assert run is not None
    run_services.run_set_total(run=run, total=4)
    run_services.run_advance(run=run, by=3)
    finished = run_services.run_finish(run=run, failed_items=1)
    assert finished.status == RunStatus.FAILED
    assert finished.is_complete is False
    assert finished.progress_done == 3 and finished.progress_total == 4
    assert "1 item(s) could not be judged" in finished.error


def test_process_run_records_a_crash_and_resume_requeues_it() -> None:
    run = _run()
    seen: list[int] = []

    def crashing(r: EvaluationRun) -> None:
        seen.append(r.pk)
        raise RuntimeError("worker lost its database connection")

    with pytest.raises(RuntimeError):
        run_services.process_run(run_id=run.pk, processor=crashing)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "worker lost its database connection" in run.error

    def succeeding(r: EvaluationRun) -> None:
        seen.append(r.pk)
        run_services.run_finish(run=r)

    resumed = run_services.run_resume(run=run)
    assert resumed.status == RunStatus.QUEUED and resumed.error == ""
    run_services.process_run(run_id=run.pk, processor=succeeding)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.is_complete
    assert run.attempts == 2 and seen == [run.pk, run.pk]


def test_succeeded_runs_do_not_resume() -> None:
    run = _run(status=RunStatus.SUCCEEDED)
    with pytest.raises(run_services.RunNotResumable):
        run_services.run_resume(run=run)


def test_an_ended_run_is_not_processed_again() -> None:
    run = _run(status=RunStatus.SUCCEEDED)
    called: list[int] = []
    run_services.process_run(run_id=run.pk, processor=lambda r: called.append(r.pk))
    assert called == []


def test_admin_actions_resume_failed_and_cancel_queued_runs(
    admin_client: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from django.urls import reverse

    failed = _run(status=RunStatus.FAILED, error="judge down")
    done = _run(status=RunStatus.SUCCEEDED)
    url = reverse("admin:benchmarks_app_evaluationrun_changelist")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post(
            url,
            {"action": "resume_runs", "_selected_action": [failed.pk, done.pk]},
            follow=True,
        )
    failed.refresh_from_db()
    done.refresh_from_db()
    assert failed.status == RunStatus.QUEUED and failed.error == ""
    assert done.status == RunStatus.SUCCEEDED
    assert len(callbacks) == 1  # only the failed run was handed to the queue
    body = response.content.decode()
    assert "Queued 1 run(s) again." in body
    assert f"Run #{done.pk} is succeeded" in body

    admin_client.post(url, {"action": "cancel_runs", "_selected_action": [failed.pk]})
    failed.refresh_from_db()
    assert failed.status == RunStatus.CANCELLED
