"""Issue 35: the paired marks lock a board's scope row before writing, as every other writer
of the board does (a run's end, an upload's update), so PostgreSQL never finds them writing
the same rows in opposite orders (deadlocks under the deadline rush), and a board that
changed while its marks were computed is seen as changed.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone

from benchmarks_app.models import Scanner
from benchmarks_app.models.audit import DatasetRelease
from benchmarks_app.models.audit_board import AuditBoardRow
from benchmarks_app.selectors.paired import BoardKey
from benchmarks_app.services.audit.boards import audit_board_refresh
from benchmarks_app.services.paired import board_paired_refresh
from tests.benchmarks_app.audit.test_board_incremental import make_release, run_end

HOLD_S = 1.0


@pytest.mark.django_db(transaction=True)
def test_paired_marks_wait_for_a_board_writer_and_see_its_change() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks: PostgreSQL (SQLite writes one at a time)")
    release = make_release(2)
    for i in range(4):
        scanner = Scanner.objects.create(name=f"tool-{i}")
        run_end(release, scanner, [(4, i, 0, 1), (3, 1, 1, 0)])
    audit_board_refresh(release=release, judge="offline")
    board = BoardKey("audit", release.pk, None, "offline")

    locked = threading.Event()

    def run_end_meanwhile() -> None:
        # What a run's end does: the release row first, then its scanner's row, committed
        # only after a while.
        try:
            with transaction.atomic():
                DatasetRelease.objects.select_for_update().filter(pk=release.pk).first()
                locked.set()
                time.sleep(HOLD_S)
                row = AuditBoardRow.objects.filter(release=release, phase=None).first()
                assert row is not None
                AuditBoardRow.objects.filter(pk=row.pk).update(computed_at=timezone.now())
        finally:
            connection.close()

    writer = threading.Thread(target=run_end_meanwhile)
    writer.start()
    assert locked.wait(10)
    started = time.monotonic()
    done = board_paired_refresh(board=board)
    waited = time.monotonic() - started
    writer.join(10)

    # It waited for the writer's commit, then found the board changed and wrote nothing
    # (the board is asked for again); without the lock it wrote, at once, the marks of the
    # board before the change.
    assert waited >= HOLD_S * 0.8, waited
    assert done.marked == 0
