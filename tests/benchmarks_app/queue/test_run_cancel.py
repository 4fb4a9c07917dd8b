# mypy: disable-error-code="arg-type"
"""Cancelling a running run: from the page, the API and the admin (issue 22, item 2).

A real ``openai`` audit run against a local fake judge that answers the repo's first truth
finding and never answers the second (it hangs). The run is processed the documented way with
no worker (``run_process_here``) on a thread of its own, hence a transactional test; one piece
at a time (``RUN_PIECES_PER_PROCESS=1``), because the test database (SQLite in memory, shared
cache) refuses concurrent writers outright. Once the first truth finding is judged and the
hanging calls are in flight, the run is cancelled: it must end ``cancelled`` while the judge
still hangs, keep what was judged, and record the calls it cut short as abandoned (none left
pending, none claiming an answer).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connections
from django.test import Client
from django.urls import reverse

from benchmarks_app.models import (
    AuditTruthResult,
    EvaluationRun,
    JudgeCall,
    PieceStatus,
    RunPiece,
    RunStatus,
    Scanner,
)
from benchmarks_app.models.judging import JudgeCallStatus
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.scheduling import run_pieces_prepare, run_process_here
from tests.benchmarks_app.sqlite_reads import reads_take_no_table_locks
from tests.factories.audit import repo_with_scan
from tests.factories.common import UserFactory
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

pytestmark = pytest.mark.django_db(transaction=True)

NO_MATCH = json.dumps(
    {
        "is_match": False,
        "is_partial_match": False,
        "explanation": "none of these",
        "severity_from_junior_auditor": "N/A",
        "severity_from_truth": "N/A",
        "index_of_finding_from_junior_auditor": -1,
    }
)


class Hanging:
    """Answers a truth titled "Answered ..." at once; one titled "Hangs ..." never (until
    released at the end of the test)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Any:
        user = body["messages"][-1]["content"]
        if "Title: Hangs" in user:
            self.release.wait(60)
        return completion(NO_MATCH)


def _until(check: Callable[[], bool], run: EvaluationRun, timeout_s: float = 30.0) -> None:
    with reads_take_no_table_locks():
        deadline = time.monotonic() + timeout_s
        while not _safely(check):
            if time.monotonic() > deadline:
                state = EvaluationRun.objects.values("status", "error").get(pk=run.pk)
                calls = list(JudgeCall.objects.filter(run=run).values_list("status", "error"))
                pieces = list(RunPiece.objects.filter(run=run).values_list("status", "error"))
                raise AssertionError(f"the run never got there: {state} {calls} {pieces}")
            time.sleep(0.05)


def _safely(check: Callable[[], bool]) -> bool:
    try:
        return check()
    except OperationalError:  # the worker's write holds the table this moment: look again
        return False


def _cancel_by_page(run: EvaluationRun, client: Client) -> None:
    response = client.post(reverse("runs:cancel", args=[run.pk]), follow=True)
    assert "cancelled" in response.content.decode()


def _cancel_by_api(run: EvaluationRun, client: Client) -> None:
    response = client.post(reverse("api:run-cancel", args=[run.pk]))
    assert response.status_code == 200, response.content
    assert response.json()["status"] == RunStatus.CANCELLED


def _cancel_by_admin(run: EvaluationRun, client: Client) -> None:
    response = client.post(
        reverse("admin:benchmarks_app_evaluationrun_changelist"),
        {"action": "cancel_runs", "_selected_action": [run.pk]},
        follow=True,
    )
    assert "Cancelled 1 run(s)" in response.content.decode()


def _when_the_table_is_free(action: Callable[[], None], timeout_s: float = 10.0) -> None:
    """``action``, tried again while the worker thread holds a table it writes: the test
    database (SQLite in memory, shared cache) refuses a second writer at once instead of
    waiting, and a refused ``BEGIN`` has written nothing (a clean-clone CI run failed so)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            action()
            return
        except OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture
def judge_settings(settings: Any) -> Any:
    settings.OPENAI_API_KEY = "test-key"
    settings.JUDGE_MODEL = "fake-model"
    settings.JUDGE_MODELS = []
    settings.JUDGE_MAX_RETRIES = 0
    settings.JUDGE_TIMEOUT_S = 60.0
    settings.JUDGE_CONCURRENCY = 8
    settings.RUN_CANCEL_POLL_S = 0.1
    settings.RUN_PIECES_PER_PROCESS = 1
    return settings


@pytest.mark.parametrize(
    ("cancel", "by_staff"),
    [(_cancel_by_page, False), (_cancel_by_api, False), (_cancel_by_admin, True)],
)
def test_a_running_run_is_cancelled_keeping_what_was_judged(
    judge_settings: Any, cancel: Callable[[EvaluationRun, Client], None], by_staff: bool
) -> None:
    owner = UserFactory()
    staff = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    # Signed in before the worker thread writes (the session is a write of its own).
    client = Client()
    client.force_login(staff if by_staff else owner)
    repo_with_scan(truths=["Answered first", "Hangs second"], findings=["Gas", "Style"])
    hanging = Hanging()
    with FakeOpenAI(hanging) as server:
        judge_settings.OPENAI_BASE_URL = server.base_url
        run = audit_run_create(
            scanner=Scanner.objects.get(name="tool"), judge="openai", enqueue=False
        )
        EvaluationRun.objects.filter(pk=run.pk).update(created_by=owner)
        run_pieces_prepare(run=run)

        def process() -> None:
            try:
                run_process_here(run=run)
            finally:
                connections.close_all()

        worker = threading.Thread(target=process, daemon=True)
        worker.start()
        try:
            _until(
                lambda: (
                    AuditTruthResult.objects.filter(run=run).count() == 1
                    and JudgeCall.objects.filter(run=run, status=JudgeCallStatus.PENDING).count()
                    >= 2
                ),
                run,
            )
            assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.RUNNING
            _when_the_table_is_free(lambda: cancel(run, client))
            # The judge still hangs: the worker stops because the run was cancelled.
            worker.join(timeout=20)
            assert not worker.is_alive(), "the run's pieces did not stop"
        finally:
            hanging.release.set()
            worker.join(timeout=20)

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.finished_at is not None
    # What was judged is kept: the first truth finding.
    kept = AuditTruthResult.objects.filter(run=run)
    assert list(kept.values_list("truth_finding__title", flat=True)) == ["Answered first"]
    calls = JudgeCall.objects.filter(run=run)
    statuses = list(calls.values_list("status", flat=True))
    assert JudgeCallStatus.PENDING not in statuses
    abandoned = calls.filter(status=JudgeCallStatus.ABANDONED)
    assert abandoned.count() >= 2
    assert all("abandoned" in e for e in abandoned.values_list("error", flat=True))
    # Only the hanging questions were cut short; the answered ones stay ok.
    assert calls.filter(status=JudgeCallStatus.OK).count() == statuses.count(JudgeCallStatus.OK)
    assert statuses.count(JudgeCallStatus.OK) >= 2
    pieces = RunPiece.objects.filter(run=run)
    assert set(pieces.values_list("status", flat=True)) == {PieceStatus.FAILED}
    assert set(pieces.values_list("error", flat=True)) == {"run cancelled"}


def test_an_ended_run_is_not_cancelled_and_strangers_may_not(judge_settings: Any) -> None:
    owner, stranger = UserFactory(), UserFactory()
    repo_with_scan(truths=["Answered first"], findings=["Gas"])
    run = audit_run_create(scanner=Scanner.objects.get(name="tool"), judge="offline", enqueue=False)
    EvaluationRun.objects.filter(pk=run.pk).update(created_by=owner, status=RunStatus.RUNNING)
    client = Client()
    client.force_login(stranger)
    assert client.post(reverse("api:run-cancel", args=[run.pk])).status_code in (403, 404)
    assert client.post(reverse("runs:cancel", args=[run.pk])).status_code in (403, 404)
    assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.RUNNING
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)
    client.force_login(owner)
    response = client.post(reverse("api:run-cancel", args=[run.pk]))
    assert response.status_code == 409
    assert "only a run that has not ended" in response.json()["detail"]
    assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
