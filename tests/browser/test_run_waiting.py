"""A run on a judge that does not answer says so on its page within 10 s, and its participant
cancels and resumes it from there (issue 37, item 5).

The judge is a local socket that takes connections and never answers (the record's timeout is
1 s); a worker thread processes the run as a qcluster would. The page follows the run live:
the waiting reason appears without a reload, as the worker records the outage it rides out.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import expect

from benchmarks_app.models import EvaluationRun, RunStatus
from benchmarks_app.services import runs as run_services
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.judge_records import judge_record_create
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import repo_with_scan
from tests.factories.common import PASSWORD, UserFactory

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


@pytest.fixture
def silent_judge() -> Iterator[str]:
    """A server that accepts connections (the kernel's backlog) and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        sock.close()


@pytest.fixture
def no_worker_queue(monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    """Tasks wait in django-q2's ORM queue, as on a site (no qcluster runs here)."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "ORM", "default")
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}
    # The worker gives up on a silent judge quickly, and records the outage every 0.2 s.
    settings.JUDGE_PROBE = False
    settings.JUDGE_BACKOFF_BASE_S = 0.1
    settings.JUDGE_BACKOFF_MAX_S = 0.3
    settings.RUN_CANCEL_POLL_S = 0.2
    monkeypatch.setenv("SILENT_JUDGE_KEY", "key")


def test_a_run_on_a_silent_judge_says_why_and_its_participant_cancels_and_resumes_it(
    page: Any, login: Any, silent_judge: str, no_worker_queue: None, screenshot: Any
) -> None:
    participant = UserFactory.create(username="waiting-participant")
    repo, result = repo_with_scan(truths=["Reentrancy in withdraw"], findings=["Reentrancy"])
    publish_dataset(repo)
    judge_record_create(
        name="silent",
        base_url=silent_judge,
        model="silent-model",
        api_key_env="SILENT_JUDGE_KEY",
        timeout_s=1,
        concurrency=2,
    )
    run = audit_run_create(
        scanner=result.scanner, judge="silent", created_by=participant, enqueue=False
    )
    run_services.run_pieces_prepare(run=run)

    def work() -> None:
        try:
            run_services.run_process_here(run=run)
        finally:
            connections.close_all()

    worker = threading.Thread(target=work, name="worker", daemon=True)
    worker.start()
    try:
        login(participant, PASSWORD)
        page.goto(f"/audit/runs/{run.pk}/")
        waiting = page.locator("#run-status [data-role=waiting]")
        expect(waiting).to_contain_text(
            re.compile(r"Judge silent unreachable since \d\d:\d\d:\d\d, "), timeout=10_000
        )
        expect(page.locator("#run-status [data-role=status]")).to_have_text("Running")
        screenshot("waiting-for-judge")

        page.locator("[data-role=cancel] button").click()
        page.wait_for_url(re.compile(rf"/audit/runs/{run.pk}/$"))
        worker.join(timeout=20)
        assert not worker.is_alive(), "the worker did not stop after the cancel"
        # The page the cancel redirected to was read while the worker settled its piece: on
        # SQLite's in-memory shared-cache test database a read beside a write is refused at
        # once ("database table is locked", a 500 seen in CI), where a file database waits.
        # Read once the worker has stopped.
        page.reload()
        expect(page.locator("#run-status [data-role=status]")).to_have_text("Cancelled")
        expect(page.locator("[data-role=waiting]")).to_be_hidden()
        assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.CANCELLED

        page.locator("[data-role=resume] button").click()
        page.wait_for_url(re.compile(rf"/audit/runs/{run.pk}/$"))
        expect(page.locator("#run-status [data-role=status]")).to_have_text("Queued")
        # No qcluster here: the resumed run says so, and may be cancelled again.
        expect(page.locator("#run-status [data-role=waiting]")).to_contain_text(
            "No worker has picked it up"
        )
        expect(page.locator("[data-role=cancel] button")).to_be_visible()
        screenshot("resumed")
        assert EvaluationRun.objects.get(pk=run.pk).status == RunStatus.QUEUED
    finally:
        run_services.run_cancel(run=EvaluationRun.objects.get(pk=run.pk))
        worker.join(timeout=20)
