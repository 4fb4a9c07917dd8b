"""Past the re-queue cap (issue 40, item 6): when a piece fails its run, the run's sibling
pieces stop (no more judge calls) and every pending ledger row gets a final outcome.

The sweeper's case needs no worker: a piece whose holders keep dying reaches the cap while a
sibling waits in the queue, another is parked on the judge and a third was held by a worker
that died too, each with a call its dead holder left pending. The live case runs a real
``openai`` audit piece on a thread of its own against a judge that hangs (one piece at a
time: SQLite's in-memory test database refuses concurrent writers), and fails the run from
the sweeper meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError, connections
from django.test import override_settings
from django.utils import timezone

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
from benchmarks_app.services import sweeper
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.leases import lease_holder
from benchmarks_app.services.scheduling import run_pieces_prepare, run_process_here
from tests.benchmarks_app.queue.test_run_cancel import Hanging
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI

UNSETTLED = [PieceStatus.QUEUED, PieceStatus.RUNNING, PieceStatus.WAITING]


def _pending_call(run: EvaluationRun, piece: RunPiece, attempt: int) -> JudgeCall:
    return JudgeCall.objects.create(
        run=run,
        judge="openai",
        prompt_hash="h" * 64,
        status=JudgeCallStatus.PENDING,
        holder=lease_holder(RunPiece(pk=piece.pk, attempt=attempt)),
    )


@pytest.mark.django_db
def test_the_requeue_cap_leaves_no_piece_unsettled_and_no_row_pending(monkeypatch: Any) -> None:
    sent: list[int] = []
    monkeypatch.setattr(sweeper, "piece_send", lambda *, piece: sent.append(piece.pk))
    run = EvaluationRun.objects.create(benchmark="probes", judge="rules", status="running")
    expired = timezone.now() - timedelta(seconds=5)
    capped = RunPiece.objects.create(
        run=run, key="capped", status=PieceStatus.RUNNING, attempt=3, requeues=3,
        lease_expires_at=expired, worker="dead:1/2",
    )  # fmt: skip
    queued = RunPiece.objects.create(run=run, key="queued", attempt=1, requeues=1)
    RunPiece.objects.create(  # parked on the judge
        run=run, key="parked", status=PieceStatus.WAITING, attempt=1,
        retry_at=timezone.now() + timedelta(seconds=600),
    )  # fmt: skip
    dead = RunPiece.objects.create(
        run=run, key="dead", status=PieceStatus.RUNNING, attempt=2, requeues=1,
        lease_expires_at=expired,
    )  # fmt: skip
    for piece in (capped, queued, dead):
        _pending_call(run, piece, piece.attempt)
    _pending_call(run, dead, 1)
    with override_settings(RUN_PIECE_MAX_REQUEUES=3):
        # The capped piece is met first (pieces sweep in key order: "capped" < "dead").
        report = sweeper.runs_sweep()
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "re-queued 3 times (RUN_PIECE_MAX_REQUEUES=3)" in run.error
    pieces = RunPiece.objects.filter(run=run)
    assert not pieces.filter(status__in=UNSETTLED).exists()
    assert dict(pieces.values_list("key", "error"))["queued"] == "run failed"
    assert sent == []  # nothing handed out again for a failed run
    assert report.expired == []
    calls = JudgeCall.objects.filter(run=run)
    assert not calls.filter(status=JudgeCallStatus.PENDING).exists()
    assert calls.filter(status=JudgeCallStatus.LOST).count() == 4


@pytest.mark.django_db
def test_the_sweeper_settles_an_ended_runs_piece_whose_holder_died_after_the_end() -> None:
    run = EvaluationRun.objects.create(benchmark="probes", judge="rules", status="failed")
    piece = RunPiece.objects.create(
        run=run, status=PieceStatus.RUNNING, attempt=1,
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )  # fmt: skip
    _pending_call(run, piece, 1)
    report = sweeper.runs_sweep()
    piece.refresh_from_db()
    assert report.settled == 1
    assert (piece.status, piece.error) == (PieceStatus.FAILED, "run failed")
    assert JudgeCall.objects.get(run=run).status == JudgeCallStatus.LOST


def _until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if check():
                return
        except OperationalError:  # the worker's write holds the table this moment
            pass
        if time.monotonic() > deadline:
            raise AssertionError("never got there")
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_a_run_failed_at_the_cap_stops_its_live_sibling_and_its_calls(settings: Any) -> None:
    settings.OPENAI_API_KEY = "test-key"
    settings.JUDGE_MODEL = "fake-model"
    settings.JUDGE_MODELS = []
    settings.JUDGE_MAX_RETRIES = 0
    settings.JUDGE_TIMEOUT_S = 60.0
    settings.RUN_CANCEL_POLL_S = 0.1
    settings.RUN_PIECES_PER_PROCESS = 1
    settings.RUN_PIECE_MAX_REQUEUES = 2
    repo_with_scan(truths=["Answered first", "Hangs second"], findings=["Gas", "Style"])
    hanging = Hanging()
    with FakeOpenAI(hanging) as server:
        settings.OPENAI_BASE_URL = server.base_url
        run = audit_run_create(
            scanner=Scanner.objects.get(name="tool"), judge="openai", enqueue=False
        )
        run_pieces_prepare(run=run)
        # A sibling whose workers keep dying: at the cap, with a call its last holder left.
        capped = RunPiece.objects.create(
            run=run, key="capped", status=PieceStatus.RUNNING, attempt=3, requeues=2,
            lease_expires_at=timezone.now() + timedelta(seconds=600),
        )  # fmt: skip
        capped_call = _pending_call(run, capped, 3)

        def process() -> None:
            try:
                run_process_here(run=run)
            finally:
                connections.close_all()

        worker = threading.Thread(target=process, daemon=True)
        worker.start()
        try:
            # The sibling idles on the hanging judge (its first truth judged, its calls sent).
            # Every call it has opened must have reached the server before the run fails:
            # its ledger row is written just before the request, and a vote still on its way
            # would look like a call made after the failure.
            live_calls = JudgeCall.objects.filter(run=run, status=JudgeCallStatus.PENDING)
            sibling_calls = JudgeCall.objects.filter(run=run).exclude(pk=capped_call.pk)

            def sibling_idle() -> bool:
                return (
                    AuditTruthResult.objects.filter(run=run).count() == 1
                    and live_calls.exclude(pk=capped_call.pk).count() >= 2
                    and len(server.requests) == sibling_calls.count()
                )

            def sibling_stays_idle() -> bool:
                if not sibling_idle():
                    return False
                time.sleep(0.3)
                return sibling_idle()

            _until(sibling_stays_idle)
            # Its lease runs out: the sweeper finds it past the cap and fails the run.
            RunPiece.objects.filter(pk=capped.pk).update(
                lease_expires_at=timezone.now() - timedelta(seconds=1)
            )
            _until(lambda: sweeper.runs_sweep() is not None)
            asked_at_failure = len(server.requests)
            worker.join(timeout=20)
            assert not worker.is_alive(), "the failed run's sibling piece did not stop"
        finally:
            hanging.release.set()
            worker.join(timeout=20)
        # No call after the run failed: the sibling stopped asking the judge.
        assert len(server.requests) == asked_at_failure
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "RUN_PIECE_MAX_REQUEUES=2" in run.error
    pieces = RunPiece.objects.filter(run=run)
    assert not pieces.filter(status__in=UNSETTLED).exists()
    assert set(pieces.exclude(pk=capped.pk).values_list("error", flat=True)) == {"run failed"}
    calls = JudgeCall.objects.filter(run=run)
    assert not calls.filter(status=JudgeCallStatus.PENDING).exists()
    assert calls.filter(status=JudgeCallStatus.ABANDONED).count() >= 2  # the sibling's
    assert calls.filter(status=JudgeCallStatus.LOST).count() == 1  # the capped piece's
