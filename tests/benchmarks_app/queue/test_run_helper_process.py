"""`--wait` with no worker forks a helper process (``RUN_PROCESSES_HERE``): same run, same
verdicts, and a helper that dies leaves nothing lost.

PostgreSQL only: a forked process must reach the same database, which pytest-django's
in-memory SQLite test database is not.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.db import connection

from benchmarks_app.models import EvaluationRun, JudgeCacheEntry, RunPiece, Scanner
from benchmarks_app.models.runs import PieceStatus
from benchmarks_app.services import piece_sending, scheduling
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_pieces_prepare, run_process_here
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.benchmarks_app.audit.test_speculative_processing import (
    FINDINGS,
    TRUTHS,
    _ledger,
    _results,
    judge,
)
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (a forked helper cannot share an in-memory test database)")


@pytest.fixture
def openai_settings(settings: Any) -> Any:
    settings.OPENAI_API_KEY = "test-key"
    settings.JUDGE_MAX_RETRIES = 1
    settings.JUDGE_BACKOFF_BASE_S = 0.001
    settings.JUDGE_BACKOFF_MAX_S = 0.002
    settings.JUDGE_MODELS = []  # any model: the fake server answers for all of them
    return settings


@pytest.fixture
def repos(db: Any) -> None:
    made = [repo_with_scan(truths=t, findings=f)[0] for t, f in zip(TRUTHS, FINDINGS, strict=True)]
    publish_dataset(*made)


def _run(settings: Any, server: FakeOpenAI, *, processes: int) -> EvaluationRun:
    JudgeCacheEntry.objects.all().delete()  # every run asks everything again
    settings.OPENAI_BASE_URL = server.base_url
    run = audit_run_create(
        scanner=Scanner.objects.get(name="tool"),
        judge="openai",
        iterations=3,
        batch_size=5,
        enqueue=False,
    )
    run_pieces_prepare(run=run)
    # One piece per process at a time, so that both processes must take a share.
    settings.RUN_PIECES_PER_PROCESS = 1
    run_process_here(run=run, processes=processes)
    run.refresh_from_db()
    return run


def test_a_helper_process_shares_the_pieces_and_changes_no_verdict(
    openai_settings: Any, repos: None
) -> None:
    with FakeOpenAI(judge, keep_alive=True) as server:
        alone = _run(openai_settings, server, processes=1)
        shared = _run(openai_settings, server, processes=2)
    assert alone.status == shared.status == "succeeded"
    assert _results(alone) == _results(shared)
    assert _ledger(alone) == _ledger(shared)
    workers = set(RunPiece.objects.filter(run=shared).values_list("worker", flat=True))
    # Two processes held the pieces: this one and the helper it forked.
    assert len({w.rsplit("/", 1)[-1] for w in workers if w}) == 2, workers


def test_a_helper_that_dies_loses_nothing(
    openai_settings: Any, repos: None, monkeypatch: Any
) -> None:
    parent = os.getpid()
    drive = scheduling._drive

    def helper_dies_at_once(*args: Any, **kwargs: Any) -> Any:
        if os.getpid() != parent:
            os._exit(1)  # the helper is killed before it claims anything
        return drive(*args, **kwargs)

    with FakeOpenAI(judge, keep_alive=True) as server:
        reference = _run(openai_settings, server, processes=1)
        monkeypatch.setattr(scheduling, "_drive", helper_dies_at_once)
        run = _run(openai_settings, server, processes=2)
        left = RunPiece.objects.filter(run=run, status=PieceStatus.QUEUED).count()
        # The helper's share is still queued, not failed or lost; the run is not over.
        assert left >= 1
        run.refresh_from_db()
        assert run.status in ("queued", "running", "waiting")
        # Once the pickup grace has passed, run_wait sees a run nobody works on.
        openai_settings.RUN_PICKUP_GRACE_S = 0
        assert piece_sending.run_is_stalled(run)
        # What run_wait does with a stalled run: process it here again.
        monkeypatch.setattr(scheduling, "_drive", drive)
        run_process_here(run=run, processes=1)
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert _results(run) == _results(reference)
    assert not RunPiece.objects.filter(run=run).exclude(status=PieceStatus.DONE).exists()
