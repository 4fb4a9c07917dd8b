"""The run life cycle shared by all benchmarks: pieces, leases, fencing, finish, resume, wait."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus
from benchmarks_app.services import leases, piece_running
from benchmarks_app.services import runs as run_services
from benchmarks_app.services.sweeper import runs_sweep

pytestmark = pytest.mark.django_db


def _run(**kwargs: Any) -> EvaluationRun:
    return EvaluationRun.objects.create(benchmark="probes", judge="rules", **kwargs)


def _piece(run: EvaluationRun, key: str = "", **kwargs: Any) -> RunPiece:
    return RunPiece.objects.create(run=run, key=key, **kwargs)


def test_a_piece_is_claimed_once() -> None:
    piece = _piece(_run())
    first = leases.piece_claim(piece_id=piece.pk)
    second = leases.piece_claim(piece_id=piece.pk)
    assert first is not None and first.status == PieceStatus.RUNNING and first.attempt == 1
    assert first.lease_expires_at is not None and first.lease_expires_at > timezone.now()
    assert second is None


def test_a_piece_whose_lease_expired_is_claimed_again_with_a_new_attempt() -> None:
    piece = _piece(_run())
    assert leases.piece_claim(piece_id=piece.pk) is not None
    RunPiece.objects.filter(pk=piece.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    again = leases.piece_claim(piece_id=piece.pk)
    assert again is not None and again.attempt == 2


def test_a_worker_whose_lease_was_taken_over_cannot_write() -> None:
    run = _run()
    piece = _piece(run)
    old = leases.piece_claim(piece_id=piece.pk)
    assert old is not None
    RunPiece.objects.filter(pk=piece.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    new = leases.piece_claim(piece_id=piece.pk)
    assert new is not None
    run_services.run_set_total(run=run, total=5)
    with leases.holding(old), pytest.raises(leases.LeaseLost):
        run_services.run_advance(run=run, by=1)
    with leases.holding(old), pytest.raises(leases.LeaseLost):
        run_services.run_finish(run=run)
    with leases.holding(new):
        run_services.run_advance(run=run, by=2)
    run.refresh_from_db()
    assert run.progress_done == 2 and run.status == RunStatus.QUEUED
    # The old holder cannot end the piece either.
    assert leases.piece_end(piece=old, status=PieceStatus.DONE) is False
    assert leases.piece_end(piece=new, status=PieceStatus.DONE) is True


@pytest.mark.django_db(transaction=True)
def test_the_fence_refuses_to_run_outside_a_transaction() -> None:
    piece = _piece(_run())
    held = leases.piece_claim(piece_id=piece.pk)
    assert held is not None
    with leases.holding(held), pytest.raises(RuntimeError):
        leases.lease_fence()
    with leases.holding(held), transaction.atomic():
        leases.lease_fence()


def test_the_keeper_renews_the_lease_and_notices_a_takeover() -> None:
    run = _run()
    piece = _piece(run)
    held = leases.piece_claim(piece_id=piece.pk)
    assert held is not None
    RunPiece.objects.filter(pk=piece.pk).update(lease_expires_at=timezone.now())
    keeper = leases.LeaseKeeper(held, lease_s=30)
    assert keeper.renew() is True
    piece.refresh_from_db()
    assert piece.lease_expires_at is not None
    assert piece.lease_expires_at > timezone.now() + timedelta(seconds=25)
    RunPiece.objects.filter(pk=piece.pk).update(attempt=held.attempt + 1)
    assert keeper.renew() is False


def test_finish_with_failed_items_marks_the_run_failed_and_incomplete() -> None:
    run = _run()
    run_services.run_set_total(run=run, total=4)
    run_services.run_advance(run=run, by=3)
    finished = run_services.run_finish(run=run, failed_items=1)
    assert finished.status == RunStatus.FAILED
    assert finished.is_complete is False
    assert finished.progress_done == 3 and finished.progress_total == 4
    assert "1 item(s) could not be judged" in finished.error


def _use_kind(monkeypatch: Any, process: Any) -> None:
    # One dict shared by the run modules; the processor is looked up where pieces run.
    monkeypatch.setitem(run_services.RUN_KINDS, "probes", run_services.RunKind(process="x.process"))
    monkeypatch.setattr(piece_running, "import_string", lambda path: process)


def test_a_crashed_piece_fails_the_run_and_resume_requeues_it(
    monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run()
    seen: list[int] = []

    def crashing(r: EvaluationRun) -> None:
        seen.append(r.pk)
        raise RuntimeError("worker lost its database connection")

    _use_kind(monkeypatch, crashing)
    (piece,) = run_services.run_pieces_prepare(run=run)
    with pytest.raises(RuntimeError):
        run_services.piece_process(piece_id=piece.pk)
    run.refresh_from_db()
    piece.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "worker lost its database connection" in run.error
    assert piece.status == PieceStatus.FAILED

    def succeeding(r: EvaluationRun) -> None:
        seen.append(r.pk)
        run_services.run_finish(run=r)

    _use_kind(monkeypatch, succeeding)
    # Q_SYNC: the re-sent piece runs when the resume commits.
    with django_capture_on_commit_callbacks(execute=True):
        resumed = run_services.run_resume(run=run)
    assert resumed.error == ""
    run.refresh_from_db()
    piece.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.is_complete
    assert run.attempts == 2 and seen == [run.pk, run.pk]
    assert piece.status == PieceStatus.DONE and piece.attempt == 2


def test_a_second_delivery_of_a_piece_does_nothing(monkeypatch: Any) -> None:
    run = _run()
    calls: list[int] = []

    def once(r: EvaluationRun) -> None:
        calls.append(r.pk)
        run_services.run_finish(run=r)

    _use_kind(monkeypatch, once)
    (piece,) = run_services.run_pieces_prepare(run=run)
    run_services.piece_process(piece_id=piece.pk)
    run_services.piece_process(piece_id=piece.pk)
    run.refresh_from_db()
    assert calls == [run.pk] and run.status == RunStatus.SUCCEEDED and run.attempts == 1


def test_the_sweeper_requeues_an_expired_lease_and_the_run_finishes(
    monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(status=RunStatus.RUNNING)
    piece = _piece(
        run,
        status=PieceStatus.RUNNING,
        attempt=1,
        worker="dead-host:1/2",
        lease_expires_at=timezone.now() - timedelta(seconds=5),
    )
    _use_kind(monkeypatch, lambda r: run_services.run_finish(run=r))
    report = runs_sweep()  # Q_SYNC: the re-sent task runs at once
    run.refresh_from_db()
    piece.refresh_from_db()
    assert report.expired == [piece.pk]
    assert piece.status == PieceStatus.DONE and piece.attempt == 2
    assert run.status == RunStatus.SUCCEEDED


def test_the_sweeper_leaves_live_leases_alone() -> None:
    run = _run(status=RunStatus.RUNNING)
    piece = _piece(
        run,
        status=PieceStatus.RUNNING,
        attempt=1,
        lease_expires_at=timezone.now() + timedelta(seconds=60),
    )
    report = runs_sweep()
    piece.refresh_from_db()
    assert report.expired == [] and piece.status == PieceStatus.RUNNING and piece.attempt == 1


def test_the_sweeper_resends_a_queued_piece_whose_task_was_lost(monkeypatch: Any) -> None:
    run = _run()
    piece = _piece(
        run,
        status=PieceStatus.QUEUED,
        task_id="gone",
        enqueued_at=timezone.now() - timedelta(minutes=5),
    )
    _use_kind(monkeypatch, lambda r: run_services.run_finish(run=r))
    report = runs_sweep()
    run.refresh_from_db()
    assert report.lost == [piece.pk]
    assert run.status == RunStatus.SUCCEEDED


def test_the_sweeper_ends_a_run_whose_pieces_all_ended() -> None:
    run = _run(status=RunStatus.RUNNING)
    _piece(run, status=PieceStatus.DONE, attempt=1)
    report = runs_sweep()
    run.refresh_from_db()
    assert report.finished_runs == [run.pk]
    assert run.status == RunStatus.SUCCEEDED


def test_a_run_waiting_for_the_judge_resumes_by_itself(monkeypatch: Any) -> None:
    run = _run(status=RunStatus.WAITING, error="Waiting for the judge: down")
    piece = _piece(run, status=PieceStatus.WAITING, attempt=1)
    _use_kind(monkeypatch, lambda r: run_services.run_finish(run=r))
    report = runs_sweep()
    run.refresh_from_db()
    assert report.waiting == [piece.pk]
    assert run.status == RunStatus.SUCCEEDED and run.error == ""


def test_succeeded_and_held_runs_do_not_resume() -> None:
    with pytest.raises(run_services.RunNotResumable):
        run_services.run_resume(run=_run(status=RunStatus.SUCCEEDED))
    held = _run(status=RunStatus.RUNNING)
    _piece(
        held,
        status=PieceStatus.RUNNING,
        attempt=1,
        lease_expires_at=timezone.now() + timedelta(seconds=60),
    )
    with pytest.raises(run_services.RunNotResumable):
        run_services.run_resume(run=held)


def test_a_stalled_queued_run_can_be_resumed(django_capture_on_commit_callbacks: Any) -> None:
    # A run whose task a killed cluster had already taken: queued, nothing in flight.
    run = _run(status=RunStatus.QUEUED)
    _piece(run, status=PieceStatus.QUEUED, enqueued_at=timezone.now() - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        resumed = run_services.run_resume(run=run)
    assert resumed.status == RunStatus.QUEUED and len(callbacks) == 1


def test_an_ended_run_is_not_processed_again(monkeypatch: Any) -> None:
    run = _run(status=RunStatus.SUCCEEDED)
    piece = _piece(run)
    called: list[int] = []
    _use_kind(monkeypatch, lambda r: called.append(r.pk))
    run_services.piece_process(piece_id=piece.pk)
    piece.refresh_from_db()
    assert called == [] and piece.status == PieceStatus.FAILED


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


def test_a_judge_outage_pauses_the_run_and_the_sweeper_finishes_it(monkeypatch: Any) -> None:
    from scoring.judges.failures import JudgeUnavailable

    run = _run()
    outage = {"down": True}

    def judging(r: EvaluationRun) -> None:
        if outage["down"]:
            raise JudgeUnavailable("judge fake at http://127.0.0.1:9 unreachable for 300 s")
        run_services.run_finish(run=r)

    _use_kind(monkeypatch, judging)
    (piece,) = run_services.run_pieces_prepare(run=run)
    run_services.piece_process(piece_id=piece.pk)  # no exception: a pause is not a failure
    run.refresh_from_db()
    piece.refresh_from_db()
    assert run.status == RunStatus.WAITING and "unreachable" in run.error
    assert piece.status == PieceStatus.WAITING
    # Parked: its worker is free, and the sweeper leaves it alone until its retry time.
    assert piece.retry_at is not None and piece.retry_at > timezone.now()
    assert piece.lease_expires_at is None
    assert runs_sweep().waiting == []
    outage["down"] = False
    RunPiece.objects.filter(pk=piece.pk).update(retry_at=timezone.now() - timedelta(seconds=1))
    report = runs_sweep()
    run.refresh_from_db()
    assert report.waiting == [piece.pk]
    assert run.status == RunStatus.SUCCEEDED and run.is_complete and run.error == ""


def test_a_stale_recount_never_takes_the_counter_backwards(client: Any) -> None:
    """A piece counts the stored results, then writes the count; a sibling that advanced the
    counter in between must not be undone (a cancelled run showed 46/188, then 7/188 on reload,
    for good: a cancelled run never reaches the end's recount). Issue 37 item 5."""
    run = _run()
    run_services.run_set_total(run=run, total=10)
    stale = EvaluationRun.objects.get(pk=run.pk)
    run_services.run_advance(run=run, by=6)
    run_services.run_set_total(run=stale, total=10, done=2)
    assert stale.progress_done == 6
    run_services.run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.progress_done == 6
    status = client.get(f"/runs/{run.pk}/status/").json()
    assert (status["progress_done"], status["progress_total"]) == (6, 10)
    api = client.get(f"/api/runs/{run.pk}/").json()
    assert (api["progress_done"], api["progress_total"]) == (6, 10)
    # A smaller total still bounds the count (the table's check constraint).
    run_services.run_set_total(run=run, total=4, done=1)
    run.refresh_from_db()
    assert (run.progress_done, run.progress_total) == (4, 4)
