"""Faults a run heals from without a person: the database connection cut mid-piece (a
PostgreSQL restart or fail-over), a judge outage that parks pieces instead of holding workers,
and a piece that keeps coming back, failed with its cause past the re-queue cap.

The database cut is real on PostgreSQL (``pg_terminate_backend`` from a second connection while
the judge call is in flight); on SQLite every query on the worker's connection fails from that
moment until it reconnects, which is what a dead connection does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError, connection, connections
from django.test import override_settings
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, JudgeCall, PieceStatus, RunPiece, RunStatus
from benchmarks_app.services import piece_running, run_state
from benchmarks_app.services import runs as run_services
from benchmarks_app.services.judging import DbJudgeCache, ledger_recorder
from benchmarks_app.services.leases import current_lease, lease_holder
from benchmarks_app.services.sweeper import runs_sweep
from tests.benchmarks_app.judging.helpers import Answer, ask
from tests.scoring.judges.fake_openai import FakeOpenAI, completion


def _run(**kwargs: Any) -> EvaluationRun:
    return EvaluationRun.objects.create(benchmark="probes", judge="rules", **kwargs)


def _use_kind(monkeypatch: Any, process: Callable[[EvaluationRun], None]) -> None:
    monkeypatch.setitem(run_services.RUN_KINDS, "probes", run_services.RunKind(process="x.process"))
    monkeypatch.setattr(piece_running, "import_string", lambda path: process)


@contextmanager
def _cut_on_sqlite(cut: dict[str, bool], monkeypatch: Any) -> Iterator[None]:
    """Once ``cut`` is set, every query of this connection fails until it is closed (SQLite's
    in-memory test database ignores the close itself; a reopened connection works again)."""
    wrapper_of_this_thread = connections["default"]
    close = wrapper_of_this_thread.close

    def closing() -> None:
        cut["now"] = False
        close()

    def failing(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if cut["now"]:
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    monkeypatch.setattr(wrapper_of_this_thread, "close", closing)
    with connection.execute_wrapper(failing):
        yield


def _terminate_on_postgres(backend_pid: int) -> None:
    import psycopg

    s = connection.settings_dict
    with psycopg.connect(
        host=s["HOST"] or "127.0.0.1",
        port=s["PORT"] or 5432,
        user=s["USER"] or "postgres",
        password=s["PASSWORD"] or None,
        dbname=s["NAME"],
        autocommit=True,
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [backend_pid])


@pytest.mark.django_db(transaction=True)
def test_a_database_cut_mid_piece_is_healed_with_no_person_and_no_pending_call(
    monkeypatch: Any,
) -> None:
    """The judge answers while the worker's connection is cut: that answer cannot be recorded,
    the piece is queued again, its next holder marks the lost call and asks again; the run
    succeeds and no ledger row is left pending."""
    postgres = connection.vendor == "postgresql"
    cut = {"now": False}
    backend: dict[str, int] = {}

    def handler(body: dict[str, Any]) -> Any:
        if not cut["now"] and not JudgeCall.objects.filter(status="interrupted").exists():
            if postgres:
                _terminate_on_postgres(backend["pid"])
            cut["now"] = True
        return completion('{"label": "yes", "score": 3}')

    def process(run: EvaluationRun) -> None:
        held = current_lease()
        assert held is not None
        if postgres:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                backend["pid"] = cursor.fetchone()[0]
        holder = lease_holder(RunPiece(pk=held.piece_id, attempt=held.attempt))
        with _cut_on_sqlite(cut, monkeypatch) if not postgres else _nothing():
            recorder = ledger_recorder(run, holder=holder)
            answer = ask(srv, cache=DbJudgeCache(holder=holder), record=recorder)
        cut["now"] = False
        assert answer == Answer(label="yes", score=3)
        run_services.run_finish(run=run)

    run = _run()
    _use_kind(monkeypatch, process)
    with FakeOpenAI(handler) as srv:
        (piece,) = run_services.run_pieces_prepare(run=run)
        # No exception and no person: the worker re-queues the piece (Q_SYNC runs it at once).
        run_services.piece_process(piece_id=piece.pk)
    connection.close()
    run.refresh_from_db()
    piece.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.is_complete and run.error == ""
    assert (piece.status, piece.attempt, piece.requeues) == (PieceStatus.DONE, 2, 1)
    assert "lost the database connection" in piece.error or piece.error == ""
    calls = list(JudgeCall.objects.order_by("pk").values_list("status", "holder"))
    # Cut by the database, not cancelled: recorded interrupted once the worker reconnected.
    assert calls == [("interrupted", f"{piece.pk}:1"), ("ok", f"{piece.pk}:2")]
    assert len(srv.requests) == 2


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_pg_terminate_backend_mid_piece_needs_no_person(monkeypatch: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL=postgres://...)")
    test_a_database_cut_mid_piece_is_healed_with_no_person_and_no_pending_call(monkeypatch)


def _fill_the_disk() -> Callable[[], None]:
    """Make the next write that needs space fail as a full disk does; returns the undo.

    Real on SQLite (``PRAGMA max_page_count`` at the pages in use: SQLite answers
    "database or disk is full"); PostgreSQL's own message is raised there."""
    if connection.vendor != "sqlite":

        def full() -> None:
            raise OperationalError(
                'could not extend file "base/16384/2619": No space left on device'
            )

        return full
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA max_page_count")
        (before,) = cursor.fetchone()
        cursor.execute("PRAGMA page_count")
        (used,) = cursor.fetchone()
        cursor.execute(f"PRAGMA max_page_count = {int(used)}")

    def undo() -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA max_page_count = {int(before)}")

    return undo


@pytest.mark.django_db(transaction=True)
def test_a_full_disk_parks_the_run_with_its_cause_and_the_sweeper_finishes_it(
    monkeypatch: Any, client: Any
) -> None:
    """Issue 40: the write of a verdict finds no space. The piece's attempt ends with the
    named cause, the run waits ("Waiting for storage"), /health/ answers 503 saying so; once
    there is space again the sweeper's retry finishes the run without a person."""
    run = _run()
    disk = {"full": True}
    undo: list[Callable[[], None]] = []

    def process(r: EvaluationRun) -> None:
        if disk["full"]:
            undo.append(_fill_the_disk())
            if connection.vendor != "sqlite":
                undo[-1]()  # raises PostgreSQL's disk-full error
            EvaluationRun.objects.filter(pk=r.pk).update(error="v" * 200_000)
        run_services.run_finish(run=r)

    _use_kind(monkeypatch, process)
    try:
        (piece,) = run_services.run_pieces_prepare(run=run)
        run_services.piece_process(piece_id=piece.pk)  # no exception: parked, not failed
    finally:
        disk["full"] = False
        if connection.vendor == "sqlite":
            for step in undo:
                step()
    run.refresh_from_db()
    piece.refresh_from_db()
    assert piece.status == PieceStatus.WAITING and piece.retry_at is not None
    assert piece.error.startswith("Write failed: the database cannot write (OperationalError: ")
    assert run.status == RunStatus.WAITING
    assert run.error.startswith("Waiting for storage: the database cannot write")
    health = client.get("/health/")
    assert health.status_code == 503
    assert health.json()["checks"]["storage"].startswith("failing: 1 piece(s) parked")

    RunPiece.objects.filter(pk=piece.pk).update(retry_at=timezone.now() - timedelta(seconds=1))
    report = runs_sweep()  # the retry (Q_SYNC runs the re-sent piece at once)
    assert report.waiting == [piece.pk]
    run.refresh_from_db()
    piece.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.is_complete, run.error
    assert piece.status == PieceStatus.DONE and piece.requeues == 0
    assert client.get("/health/").json()["checks"]["storage"] == "ok"


@pytest.mark.django_db
def test_a_database_that_keeps_failing_fails_the_run_at_the_requeue_cap(monkeypatch: Any) -> None:
    run = _run()

    def always_cut(r: EvaluationRun) -> None:
        raise OperationalError("terminating connection due to administrator command")

    _use_kind(monkeypatch, always_cut)
    with override_settings(RUN_PIECE_MAX_REQUEUES=2):
        (piece,) = run_services.run_pieces_prepare(run=run)
        run_services.piece_process(piece_id=piece.pk)
    run.refresh_from_db()
    piece.refresh_from_db()
    assert (piece.status, piece.requeues, piece.attempt) == (PieceStatus.FAILED, 2, 3)
    assert run.status == RunStatus.FAILED
    assert "re-queued 2 times (RUN_PIECE_MAX_REQUEUES=2)" in run.error
    assert "lost the database connection" in run.error
    assert "administrator command" in run.error


@pytest.mark.django_db
def test_a_piece_whose_worker_keeps_dying_fails_with_its_cause_past_the_cap() -> None:
    run = _run(status=RunStatus.RUNNING)
    piece = RunPiece.objects.create(
        run=run,
        status=PieceStatus.RUNNING,
        attempt=3,
        requeues=3,
        worker="dead-host:1/2",
        lease_expires_at=timezone.now() - timedelta(seconds=5),
    )
    with override_settings(RUN_PIECE_MAX_REQUEUES=3):
        report = runs_sweep()
    run.refresh_from_db()
    piece.refresh_from_db()
    assert report.expired == []
    assert piece.status == PieceStatus.FAILED and piece.finished_at is not None
    assert run.status == RunStatus.FAILED
    assert "re-queued 3 times (RUN_PIECE_MAX_REQUEUES=3)" in run.error
    assert "lease of attempt 3 expired (worker dead-host:1/2)" in run.error


@pytest.mark.django_db
def test_requeues_below_the_cap_are_counted_and_judge_pauses_are_not(monkeypatch: Any) -> None:
    from scoring.judges.failures import JudgeUnavailable

    run = _run(status=RunStatus.RUNNING)
    expired = RunPiece.objects.create(
        run=run,
        key="a",
        status=PieceStatus.RUNNING,
        attempt=1,
        lease_expires_at=timezone.now() - timedelta(seconds=5),
    )
    outage = {"down": True}

    def judging(r: EvaluationRun) -> None:
        if outage["down"]:
            raise JudgeUnavailable("judge down for 300 s")

    _use_kind(monkeypatch, judging)
    runs_sweep()
    expired.refresh_from_db()
    # Re-queued once (counted), then paused on the judge and parked.
    assert (expired.status, expired.requeues) == (PieceStatus.WAITING, 1)
    RunPiece.objects.filter(pk=expired.pk).update(retry_at=timezone.now() - timedelta(seconds=1))
    runs_sweep()
    expired.refresh_from_db()
    assert (expired.status, expired.requeues) == (PieceStatus.WAITING, 1)


@pytest.mark.django_db
def test_a_judge_outage_parks_the_runs_other_pieces_without_asking_the_judge(
    monkeypatch: Any,
) -> None:
    from scoring.judges.failures import JudgeUnavailable

    run = _run()
    asked: list[str] = []

    def judging(r: EvaluationRun, key: str) -> None:
        asked.append(key)
        raise JudgeUnavailable("judge at http://127.0.0.1:9 unreachable for 300 s")

    monkeypatch.setitem(
        run_services.RUN_KINDS, "probes", run_services.RunKind(process="x.process", plan="x.plan")
    )

    def kind_function(path: str) -> Any:
        return judging if path == "x.process" else (lambda r: ["a", "b", "c"])  # type: ignore[misc]

    # The processor is found by the scheduler, the plan by the run's state module.
    monkeypatch.setattr(piece_running, "import_string", kind_function)
    monkeypatch.setattr(run_state, "import_string", kind_function)
    pieces = run_services.run_pieces_prepare(run=run)
    for piece in pieces:
        run_services.piece_process(piece_id=piece.pk)
    # Only the first piece waited on the judge; the others were parked when taken.
    assert asked == ["a"]
    statuses = list(RunPiece.objects.filter(run=run).values_list("status", "retry_at"))
    assert {status for status, _ in statuses} == {PieceStatus.WAITING}
    assert len({retry_at for _, retry_at in statuses}) == 1
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and "unreachable" in run.error


@pytest.mark.django_db
def test_a_resent_task_does_not_count_towards_the_cap(monkeypatch: Any) -> None:
    """A piece waiting behind long ones in a busy cluster's prefetch is resent often; at the
    cap already, it is still resent, not failed."""
    run = _run()
    piece = RunPiece.objects.create(
        run=run,
        status=PieceStatus.QUEUED,
        task_id="held-by-a-busy-cluster",
        requeues=2,
        enqueued_at=timezone.now() - timedelta(minutes=5),
    )
    _use_kind(monkeypatch, lambda r: run_services.run_finish(run=r))  # type: ignore[arg-type]
    with override_settings(RUN_PIECE_MAX_REQUEUES=2):
        report = runs_sweep()
    run.refresh_from_db()
    piece.refresh_from_db()
    assert report.lost == [piece.pk]
    assert (piece.status, piece.requeues) == (PieceStatus.DONE, 2)
    assert run.status == RunStatus.SUCCEEDED


def _judge_down_kind(monkeypatch: Any, asked: list[int], down: dict[str, bool]) -> None:
    """Single-piece runs whose judge raises JudgeUnavailable while ``down``; each ask is
    noted by run id, and an answered ask leaves an ``ok`` ledger row, as a real judge's."""
    from scoring.judges.failures import JudgeUnavailable

    def judging(r: EvaluationRun) -> None:
        asked.append(r.pk)
        if down["now"]:
            raise JudgeUnavailable("judge at http://127.0.0.1:9 unreachable for 300 s")
        JudgeCall.objects.create(run=r, judge="openai", model="m", status="ok")
        run_services.run_finish(run=r)

    _use_kind(monkeypatch, judging)


@pytest.mark.django_db
def test_a_judge_found_down_by_one_run_parks_the_other_runs_on_that_judge_record(
    monkeypatch: Any,
) -> None:
    from benchmarks_app.models import JudgeRecord

    shared = JudgeRecord.objects.create(name="shared", kind="openai", base_url="http://x:9/v1")
    other = JudgeRecord.objects.create(name="other", kind="openai", base_url="http://y:9/v1")
    first, second, elsewhere = (
        _run(judge_record=shared),
        _run(judge_record=shared),
        _run(judge_record=other),
    )
    asked: list[int] = []
    _judge_down_kind(monkeypatch, asked, {"now": True})
    for run in (first, second, elsewhere):
        (piece,) = run_services.run_pieces_prepare(run=run)
        run_services.piece_process(piece_id=piece.pk)
    # The second run never asked the judge its first run had found down; a run on another
    # judge record asked its own.
    assert asked == [first.pk, elsewhere.pk]
    parked = {p.run_id: p for p in RunPiece.objects.all()}
    assert {p.status for p in parked.values()} == {PieceStatus.WAITING}
    assert parked[second.pk].retry_at == parked[first.pk].retry_at
    second.refresh_from_db()
    assert second.status == RunStatus.WAITING
    assert "unreachable" in second.error and f"run #{first.pk}" in second.error


@pytest.mark.django_db
def test_the_sweeper_sends_one_probe_per_down_judge_and_the_rest_once_it_answers(
    monkeypatch: Any,
) -> None:
    from benchmarks_app.models import JudgeRecord

    shared = JudgeRecord.objects.create(name="shared", kind="openai", base_url="http://x:9/v1")
    runs = [_run(judge_record=shared, status=RunStatus.WAITING) for _ in range(3)]
    due = timezone.now() - timedelta(seconds=1)
    for run in runs:
        RunPiece.objects.create(run=run, status=PieceStatus.WAITING, retry_at=due, attempt=1)
    asked: list[int] = []
    down = {"now": True}
    _judge_down_kind(monkeypatch, asked, down)

    # Retry time, judge still down: one run's piece tries it (the synchronous queue runs it
    # at once) and is parked again; at the next pass the others are parked beside it, not
    # sent to wait out the judge's patience each.
    report = runs_sweep()
    assert len(asked) == 1 and report.waiting == [RunPiece.objects.get(run_id=asked[0]).pk]
    assert runs_sweep().waiting == [] and len(asked) == 1
    pieces = list(RunPiece.objects.order_by("pk"))
    assert {p.status for p in pieces} == {PieceStatus.WAITING}
    (retry_at,) = {p.retry_at for p in pieces}
    assert retry_at is not None and retry_at > timezone.now()

    # Before the retry time nothing is sent; once the judge has answered any run made with
    # that record since the pieces were parked, all of them go at once.
    assert runs_sweep().waiting == [] and len(asked) == 1
    down["now"] = False
    JudgeCall.objects.create(run=_run(judge_record=shared), judge="openai", model="m", status="ok")
    report = runs_sweep()
    assert sorted(report.waiting) == sorted(p.pk for p in pieces)
    assert sorted(asked[1:]) == sorted(r.pk for r in runs)
    assert set(
        EvaluationRun.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True)
    ) == {RunStatus.SUCCEEDED}
