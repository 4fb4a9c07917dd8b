"""Claims that cannot be shared (issue 40, item 4): a piece's lease and its fence (the attempt
number) are taken by one statement, and lease times come from the database's clock, so two
workers whose clocks are 120 s apart never both hold a piece and a complete run is never taken
over (nor fails on a duplicate result) because one cluster's clock is off.

The skewed clocks are injected: ``timezone.now`` answers this thread's offset from the real
time (one cluster 120 s behind, the other 120 s ahead); the database keeps the real one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.test import override_settings
from django.utils import timezone

from benchmarks_app.models import AuditTruthResult, PieceStatus, RunPiece, RunStatus
from benchmarks_app.services import leases, sweeper
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.leases import LeaseKeeper, clock_skew_seconds, piece_claim
from benchmarks_app.services.scheduling import run_pieces_prepare, run_process_here
from tests.benchmarks_app.audit.conftest import fake_verdict
from tests.benchmarks_app.queue.test_run_pieces import _repos
from tests.scoring.judges.fake_openai import FakeOpenAI

SKEW = timedelta(seconds=120)


class SkewedClocks:
    """``timezone.now`` off by a per-thread offset (``default`` for threads not set)."""

    def __init__(self, default: timedelta) -> None:
        self.default = default
        self._local = threading.local()
        self._real = timezone.now

    def set(self, offset: timedelta) -> None:
        self._local.offset = offset

    def now(self) -> datetime:
        return self._real() + getattr(self._local, "offset", self.default)


@pytest.fixture
def clocks(monkeypatch: Any) -> Iterator[SkewedClocks]:
    skewed = SkewedClocks(default=-SKEW)
    monkeypatch.setattr(timezone, "now", skewed.now)
    yield skewed


def _piece() -> RunPiece:
    run = audit_run_create(scanner=_repos(1), judge="offline", enqueue=False)
    (piece,) = run_pieces_prepare(run=run)
    return piece


@pytest.mark.django_db
@override_settings(RUN_LEASE_S=60)
def test_a_claimant_120_s_ahead_does_not_take_a_lease_written_120_s_behind(
    clocks: SkewedClocks,
) -> None:
    piece = _piece()
    clocks.set(-SKEW)
    mine = piece_claim(piece_id=piece.pk)
    assert mine is not None and mine.attempt == 1
    clocks.set(SKEW)
    assert piece_claim(piece_id=piece.pk) is None
    # Nor does the sweeper of a cluster 120 s ahead see it expired.
    assert sweeper.runs_sweep().expired == []
    piece.refresh_from_db()
    assert (piece.attempt, piece.requeues, piece.status) == (1, 0, PieceStatus.RUNNING)
    # The lease runs for RUN_LEASE_S by the database's clock, not 2 minutes off either way.
    assert piece.lease_expires_at is not None
    left = (piece.lease_expires_at - leases.database_now()).total_seconds()
    assert 55 < left <= 60


@pytest.mark.django_db
@override_settings(RUN_LEASE_S=60)
def test_a_claim_between_another_claims_update_and_its_read_is_not_shared(
    clocks: SkewedClocks,
) -> None:
    """The race of the old claim: B takes the piece right after A's update statement; A must
    still hold only the attempt it took, and B none (or A none): never both the same one."""
    piece = _piece()
    clocks.set(-SKEW)
    assert piece_claim(piece_id=piece.pk) is not None  # A's earlier, now skewed, lease
    RunPiece.objects.filter(pk=piece.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)  # expired by both clocks
    )
    held: dict[str, int | None] = {}
    racing = {"done": False}

    def b_claims_right_after_a(execute: Any, sql: str, params: Any, many: bool, ctx: Any) -> Any:
        result = execute(sql, params, many, ctx)
        if not racing["done"] and sql.lstrip().upper().startswith("UPDATE"):
            racing["done"] = True
            clocks.set(SKEW)
            b = piece_claim(piece_id=piece.pk)
            held["b"] = b.attempt if b is not None else None
            clocks.set(-SKEW)
        return result

    with connection.execute_wrapper(b_claims_right_after_a):
        a = piece_claim(piece_id=piece.pk)
    held["a"] = a.attempt if a is not None else None
    holders = [v for v in held.values() if v is not None]
    assert len(holders) == len(set(holders)), held
    piece.refresh_from_db()
    assert piece.attempt == max(holders)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_threads_never_share_a_claim(clocks: SkewedClocks) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("two connections writing at once: SQLite's in-memory test database locks")
    run = audit_run_create(scanner=_repos(1), judge="offline", enqueue=False)
    for round_ in range(10):
        RunPiece.objects.filter(run=run).delete()
        (piece,) = run_pieces_prepare(run=run)
        start = threading.Barrier(2)
        got: list[int] = []

        def claimant(
            offset: timedelta,
            piece_id: int = piece.pk,
            start: threading.Barrier = start,
            got: list[int] = got,
        ) -> None:
            clocks.set(offset)
            start.wait()
            try:
                taken = piece_claim(piece_id=piece_id)
                if taken is not None:
                    got.append(taken.attempt)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=claimant, args=(o,)) for o in (SKEW, -SKEW)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert got == [1], f"round {round_}: {got}"


@pytest.mark.django_db
def test_a_complete_run_with_a_cluster_120_s_behind_is_neither_taken_over_nor_duplicated(
    clocks: SkewedClocks, settings: Any, monkeypatch: Any
) -> None:
    """The workers run 120 s behind under a 60 s lease; before each judge call goes out (its
    ledger row written) a cluster 120 s ahead sweeps and tries to claim every held piece. Nothing
    is taken over, no re-queue is counted, and the verdicts are an undisturbed run's."""
    settings.OPENAI_API_KEY = "test-key"
    settings.JUDGE_MODEL = "fake-model"
    settings.JUDGE_MODELS = []
    settings.JUDGE_MAX_RETRIES = 0
    settings.RUN_LEASE_S = 60
    # Had the other cluster re-queued a piece, the synchronous queue would not run it now.
    monkeypatch.setattr(sweeper, "piece_send", lambda *, piece: None)
    scanner = _repos(3)
    taken_by_other: list[int] = []
    inside = {"now": False}

    def other_cluster_first(execute: Any, sql: str, params: Any, many: bool, ctx: Any) -> Any:
        if not inside["now"] and sql.startswith('INSERT INTO "benchmarks_app_judgecall"'):
            inside["now"] = True
            clocks.set(SKEW)
            try:
                sweeper.runs_sweep()
                held = RunPiece.objects.filter(status=PieceStatus.RUNNING)
                for pk in held.values_list("pk", flat=True):
                    if piece_claim(piece_id=pk) is not None:
                        taken_by_other.append(pk)
            finally:
                clocks.set(-SKEW)
                inside["now"] = False
        return execute(sql, params, many, ctx)

    with FakeOpenAI(fake_verdict) as server, connection.execute_wrapper(other_cluster_first):
        settings.OPENAI_BASE_URL = server.base_url
        run = audit_run_create(scanner=scanner, judge="openai", enqueue=False)
        run_pieces_prepare(run=run)
        run_process_here(run=run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert taken_by_other == []
    pieces = RunPiece.objects.filter(run=run)
    assert (
        sorted(pieces.values_list("attempt", "requeues", "status"))
        == [(1, 0, PieceStatus.DONE)] * 3
    )
    # Verdicts equal to a run processed with no skew and nobody else around.
    clocks.set(timedelta(0))
    with FakeOpenAI(fake_verdict) as server:
        settings.OPENAI_BASE_URL = server.base_url
        twin = audit_run_create(scanner=scanner, judge="openai", enqueue=False)
        run_pieces_prepare(run=twin)
        run_process_here(run=twin)

    def verdicts(run_id: int) -> set[tuple[Any, ...]]:
        rows = AuditTruthResult.objects.filter(run_id=run_id)
        return set(rows.values_list("truth_finding_id", "outcome", "scan_finding__index"))

    assert verdicts(run.pk) == verdicts(twin.pk) and len(verdicts(run.pk)) == 6


@pytest.mark.django_db
def test_renewal_keeps_the_lease_on_the_database_clock(clocks: SkewedClocks) -> None:
    piece = _piece()
    clocks.set(-SKEW)
    mine = piece_claim(piece_id=piece.pk)
    assert mine is not None
    keeper = LeaseKeeper(mine, lease_s=30)
    assert keeper.renew()
    piece.refresh_from_db()
    assert piece.lease_expires_at is not None
    left = (piece.lease_expires_at - leases.database_now()).total_seconds()
    assert 25 < left <= 30


@pytest.mark.django_db
def test_clock_skew_is_measured_against_the_database(clocks: SkewedClocks) -> None:
    clocks.set(-SKEW)
    assert 119 < clock_skew_seconds() < 121
    clocks.set(SKEW)
    assert -121 < clock_skew_seconds() < -119
