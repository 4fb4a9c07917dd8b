"""Issue 35: an upload brings its scanner's board rows up to date one by one, as a run's end
does, instead of rewriting every row of every board the scanner is on inside the upload's
transaction (under the deadline rush, twenty uploads and the workers' run ends wrote the same
rows and PostgreSQL aborted some of them as deadlocked: 500s).

The board it leaves equals, field by field, the one a full rebuild writes; the other
scanners' rows are not written at all (their write time unchanged).
"""

from __future__ import annotations

import pytest

from benchmarks_app.models import Scanner
from benchmarks_app.models.audit import DatasetRelease
from benchmarks_app.models.audit_board import AuditBoardRow
from benchmarks_app.services.audit import boards
from benchmarks_app.services.audit.boards import (
    audit_board_refresh,
    audit_boards_refresh_for_scanners,
)
from tests.benchmarks_app.audit.test_board_incremental import (
    full_rebuild,
    make_release,
    marks_match_the_definition,
    run_end,
    snapshot,
)

pytestmark = pytest.mark.django_db


def _board_with_scanners(names: list[str]) -> tuple[DatasetRelease, dict[str, Scanner]]:
    release = make_release(2)
    scanners = {name: Scanner.objects.create(name=name) for name in names}
    for i, scanner in enumerate(scanners.values()):
        run_end(release, scanner, [(4, i % 4, 0, 1), (3, 1, 1, i % 3)])
    audit_board_refresh(release=release, judge="offline")
    return release, scanners


def _write_times(release: DatasetRelease) -> dict[int, object]:
    return dict(
        AuditBoardRow.objects.filter(release=release, judge="offline", phase=None).values_list(
            "scanner_id", "computed_at"
        )
    )


def test_an_upload_updates_its_scanners_row_alone_and_the_board_equals_a_rebuild() -> None:
    release, scanners = _board_with_scanners(["alpha", "beta", "gamma", "delta"])
    before = _write_times(release)
    # beta's new results (what its upload's import makes current), much better than before.
    run_end(release, scanners["beta"], [(4, 4, 0, 0), (3, 3, 0, 0)])

    assert audit_boards_refresh_for_scanners(scanner_ids=[scanners["beta"].pk]) == 1

    assert snapshot(release) == full_rebuild(release)
    after = _write_times(release)
    beta = scanners["beta"].pk
    assert after[beta] != before[beta]
    untouched = {pk: at for pk, at in after.items() if pk != beta}
    # Ties of beta's old and new neighbours may be rewritten; nobody else's row is.
    rewritten = [pk for pk, at in untouched.items() if at != before[pk]]
    assert len(rewritten) <= 2, rewritten
    order = marks_match_the_definition(release)
    assert order[0][0] == "beta"


def test_many_changed_scanners_rewrite_the_board_whole_with_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release, scanners = _board_with_scanners(["a1", "a2", "a3"])
    monkeypatch.setattr(boards, "SCANNERS_UPDATED_ONE_BY_ONE", 1)
    for scanner in scanners.values():
        run_end(release, scanner, [(4, 3, 1, 0), None])
    before = _write_times(release)

    audit_boards_refresh_for_scanners(scanner_ids=[s.pk for s in scanners.values()])

    assert snapshot(release) == full_rebuild(release)
    after = _write_times(release)
    assert all(after[pk] != before[pk] for pk in before)
