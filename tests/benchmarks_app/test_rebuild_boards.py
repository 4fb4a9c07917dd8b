"""Stored boards are derived data: deleted, they are rebuilt from the results, by the command
or by ``migrate`` on a database whose results predate them."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from benchmarks_app.bench.api import seed_leaderboards
from benchmarks_app.models import ChecklistBoardRow, ProbeBoardRow
from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, attach_marks
from benchmarks_app.selectors.checklist import checklist_leaderboard
from benchmarks_app.selectors.probe_boards import probe_leaderboard
from benchmarks_app.services.boards import boards_missing

pytestmark = pytest.mark.django_db


def _boards() -> tuple[list, list, list]:
    return (
        [
            (r.scanner.name, r.rank)
            for r in attach_marks(AUDIT_SHAPE, list(AuditBoardRow.objects.order_by("scanner")))
        ],
        [(r["model"], r["rank"]) for r in probe_leaderboard(suite_name="bench-suite")],
        [(r["team"], r["rank"]) for r in checklist_leaderboard(challenge_slug="bench")],
    )


def test_the_command_rebuilds_every_board_as_it_was(capsys) -> None:
    seed_leaderboards(6)
    before = _boards()
    assert all(len(board) == 6 for board in before)
    AuditBoardRow.objects.all().delete()
    ProbeBoardRow.objects.all().delete()
    ChecklistBoardRow.objects.all().delete()
    assert boards_missing()

    call_command("rebuild_boards")
    assert "Rebuilt 1 audit board(s)" in capsys.readouterr().out
    audit, probes, checklist = _boards()
    assert sorted(audit) == sorted(before[0]) and probes == before[1] and checklist == before[2]
    assert not boards_missing()


def test_migrate_fills_boards_that_are_missing() -> None:
    seed_leaderboards(3)
    ProbeBoardRow.objects.all().delete()
    assert probe_leaderboard(suite_name="bench-suite") == []
    call_command("migrate", verbosity=0)
    assert len(probe_leaderboard(suite_name="bench-suite")) == 3
