"""How a process takes a run's pieces (issue 22, items 1 and 7): a queue task claims several
pieces of its run and leaves the rest to others, the judge probe runs once per run, submit
and sweeper do not both send a piece, and the HTTP clients log no line per call."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import override_settings

from benchmarks_app.models import PieceStatus, RunPiece, RunStatus, Scanner
from benchmarks_app.services import sweeper
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_wait
from benchmarks_app.services.scheduling import piece_process, run_pieces_prepare
from tests.benchmarks_app.audit.conftest import fake_verdict
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI

pytestmark = pytest.mark.django_db

PROBE = 'Reply with the JSON object {"ok": true}.'


def _repos(n: int) -> Scanner:
    for i in range(n):
        repo_with_scan(
            truths=[f"Reentrancy in withdraw {i}", "Oracle staleness"],
            findings=["Unrelated gas issue", "Reentrancy when withdrawing"],
        )
    return Scanner.objects.get(name="tool")


@pytest.fixture
def judge_settings(settings: Any) -> Any:
    settings.OPENAI_API_KEY = "test-key"
    settings.JUDGE_MODEL = "fake-model"
    settings.JUDGE_MODELS = []
    settings.JUDGE_MAX_RETRIES = 0
    return settings


def test_a_queue_task_claims_up_to_the_limit_of_queued_pieces_and_leaves_the_rest() -> None:
    run = audit_run_create(scanner=_repos(3), judge="offline", enqueue=False)
    pieces = run_pieces_prepare(run=run)
    assert len(pieces) == 3
    with override_settings(RUN_PIECES_PER_PROCESS=2):
        piece_process(piece_id=pieces[0].pk)
    statuses = dict(RunPiece.objects.filter(run=run).values_list("pk", "status"))
    assert statuses == {
        pieces[0].pk: PieceStatus.DONE,
        pieces[1].pk: PieceStatus.DONE,
        pieces[2].pk: PieceStatus.QUEUED,  # left to another worker
    }
    # The second piece's own task arrives later: its piece is done, but its worker slot is
    # free, so it takes the piece still queued (the fair queue's slots are not tied to a piece).
    piece_process(piece_id=pieces[1].pk)
    assert RunPiece.objects.get(pk=pieces[2].pk).status == PieceStatus.DONE
    # The third piece's task finds nothing left to do.
    piece_process(piece_id=pieces[2].pk)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.progress_done == run.progress_total == 6


def test_the_judge_probe_runs_once_per_run_not_once_per_piece(judge_settings: Any) -> None:
    judge_settings.JUDGE_PROBE = True
    scanner = _repos(3)
    with FakeOpenAI(fake_verdict) as server:
        judge_settings.OPENAI_BASE_URL = server.base_url
        run = run_wait(run=audit_run_create(scanner=scanner, judge="openai"))
        probes = [r for r in server.requests if PROBE in str(r)]
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert RunPiece.objects.filter(run=run).count() == 3
    assert len(probes) == 1
    assert "probe" in run.judge_config["request"]


def test_the_sweeper_leaves_pieces_that_submit_is_still_sending(monkeypatch: Any) -> None:
    run = audit_run_create(scanner=_repos(2), judge="offline", enqueue=False)
    sent: list[int] = []
    monkeypatch.setattr(sweeper, "piece_send", lambda *, piece: sent.append(piece.pk))
    # Cut, and not yet sent (the submit command is still looping over its pieces).
    pieces = run_pieces_prepare(run=run)
    report = sweeper.runs_sweep(run_ids=[run.pk])
    assert report.lost == [] and sent == []
    assert all(p.enqueued_at is not None for p in pieces)
    # A resumed run's pieces are stamped again.
    RunPiece.objects.filter(run=run).update(status=PieceStatus.FAILED, enqueued_at=None)
    assert all(p.enqueued_at is not None for p in run_pieces_prepare(run=run))
    assert sweeper.runs_sweep(run_ids=[run.pk]).lost == [] and sent == []


def test_judge_calls_log_no_http_lines(judge_settings: Any, caplog: Any) -> None:
    scanner = _repos(1)
    with FakeOpenAI(fake_verdict) as server, caplog.at_level(logging.INFO):
        judge_settings.OPENAI_BASE_URL = server.base_url
        run = run_wait(run=audit_run_create(scanner=scanner, judge="openai"))
        assert len(server.requests) >= 2
    assert run.status == RunStatus.SUCCEEDED, run.error
    http = [r for r in caplog.records if r.name.split(".")[0] in ("httpx", "httpx2", "httpcore")]
    assert http == []
