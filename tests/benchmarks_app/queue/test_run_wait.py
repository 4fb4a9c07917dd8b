"""``run_wait`` processes a run at once when no qcluster is alive, and only watches when one is."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from benchmarks_app.models import RunPiece, RunStatus, Scanner
from benchmarks_app.services import runs as run_services
from benchmarks_app.services.audit import audit_run_create
from tests.factories.audit import repo_with_scan

pytestmark = pytest.mark.django_db


class Watched(Exception):
    pass


def _run() -> Any:
    repo_with_scan(truths=["Reentrancy in withdraw"], findings=["Reentrancy when withdrawing"])
    return audit_run_create(scanner=Scanner.objects.get(name="tool"), judge="offline")


@pytest.fixture(autouse=True)
def _a_real_queue(settings: Any) -> None:
    # The tests' queue is synchronous, where run_wait always processes in-process.
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}


def test_no_live_cluster_processes_at_once_without_sleeping(monkeypatch: Any) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(run_services, "live_clusters", lambda: [])
    monkeypatch.setattr(run_services.time, "sleep", sleeps.append)
    run = run_services.run_wait(run=_run())
    assert run.status == RunStatus.SUCCEEDED and run.progress_done == 1
    assert sleeps == []


def test_a_live_cluster_is_watched_not_replaced(monkeypatch: Any) -> None:
    monkeypatch.setattr(run_services, "live_clusters", lambda: [object()])

    def sleep(seconds: float) -> None:
        raise Watched

    monkeypatch.setattr(run_services.time, "sleep", sleep)
    run = _run()
    run_services.run_pieces_prepare(run=run)
    # Its piece was just queued for the cluster: this process waits instead of taking it.
    RunPiece.objects.filter(run=run).update(enqueued_at=timezone.now())
    with pytest.raises(Watched):
        run_services.run_wait(run=run)
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.progress_done == 0
