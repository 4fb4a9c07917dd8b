"""A write PostgreSQL aborted to break a deadlock runs again (benchmarks_app.db_retry)."""

from __future__ import annotations

import io
import threading
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction

from benchmarks_app.db_retry import ATTEMPTS, retry_on_conflict
from benchmarks_app.models import Scanner
from tests.factories.audit import ScannerFactory


class _Sqlstate(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def _failing(sqlstate: str, times: int) -> tuple[Any, list[bytes]]:
    """A call that fails ``times`` times with an OperationalError caused by ``sqlstate``,
    reading its file each time."""
    reads: list[bytes] = []

    @retry_on_conflict
    def call(*, upload: io.BytesIO) -> str:
        reads.append(upload.read())
        if len(reads) <= times:
            raise OperationalError("deadlock detected") from _Sqlstate(sqlstate)
        return "done"

    return call, reads


@pytest.mark.django_db(transaction=True)
def test_a_deadlocked_call_runs_again_with_its_file_from_the_start(monkeypatch: Any) -> None:
    pauses: list[float] = []
    monkeypatch.setattr("benchmarks_app.db_retry.time.sleep", pauses.append)
    call, reads = _failing("40P01", ATTEMPTS - 1)
    assert call(upload=io.BytesIO(b"findings")) == "done"
    assert reads == [b"findings"] * ATTEMPTS
    # A pause before each new attempt, within a doubling window (0.05-0.25 s, then twice that).
    assert len(pauses) == ATTEMPTS - 1
    for n, pause in enumerate(pauses):
        assert 0.05 * 2**n <= pause <= 0.25 * 2**n


@pytest.mark.django_db(transaction=True)
def test_it_gives_up_after_its_attempts_and_never_retries_other_errors(monkeypatch: Any) -> None:
    monkeypatch.setattr("benchmarks_app.db_retry.time.sleep", lambda s: None)
    call, reads = _failing("40001", ATTEMPTS)
    with pytest.raises(OperationalError):
        call(upload=io.BytesIO(b"x"))
    assert len(reads) == ATTEMPTS
    call, reads = _failing("08006", 5)  # connection failure: not a conflict
    with pytest.raises(OperationalError):
        call(upload=io.BytesIO(b"x"))
    assert len(reads) == 1


@pytest.mark.django_db(transaction=True)
def test_inside_an_outer_transaction_the_error_goes_to_its_owner() -> None:
    call, reads = _failing("40P01", 1)
    with pytest.raises(OperationalError), transaction.atomic():
        call(upload=io.BytesIO(b"x"))
    assert len(reads) == 1


@pytest.mark.django_db(transaction=True)
def test_two_writers_locking_in_opposite_orders_both_finish_on_postgresql() -> None:
    """A real deadlock: each thread locks one scanner row, then wants the other's. PostgreSQL
    aborts one; retried, it finishes after the other."""
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serializes writers: no deadlock to break")
    first: Any = ScannerFactory(name="dl-a")
    second: Any = ScannerFactory(name="dl-b")
    both_hold = threading.Barrier(2, timeout=10)
    attempts: list[str] = []
    errors: list[BaseException] = []

    def writer(label: str, order: list[int]) -> None:
        @retry_on_conflict
        @transaction.atomic
        def write() -> None:
            attempts.append(label)
            Scanner.objects.filter(pk=order[0]).update(description=label)
            if attempts.count(label) == 1:
                both_hold.wait()  # the first attempts meet here, each holding a row
            Scanner.objects.filter(pk=order[1]).update(description=label)

        try:
            write()
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=writer, args=("one", [first.pk, second.pk])),
        threading.Thread(target=writer, args=("two", [second.pk, first.pk])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    # One of them was aborted by PostgreSQL and ran again; both wrote both rows.
    assert len(attempts) == 3, attempts
    descriptions = set(
        Scanner.objects.filter(pk__in=[first.pk, second.pk]).values_list("description", flat=True)
    )
    assert len(descriptions) == 1 and descriptions <= {"one", "two"}
