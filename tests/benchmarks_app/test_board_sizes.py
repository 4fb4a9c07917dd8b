"""Issue 38: a pager's count of a whole board is the stored size (``BoardSize``), kept exact by
triggers on the board tables whatever path writes the rows (bulk seeding, a board refresh,
updates that move rows between groups or boards, deletes, cascades), and a page counts no
board row for it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext

from benchmarks_app.bench import boards_checklist, boards_probes
from benchmarks_app.bench.boards_seed import seed_audit
from benchmarks_app.models import BoardSize, ChecklistBoardRow, ProbeBoardRow
from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.models.board_sizes import SIZED_BOARDS
from benchmarks_app.services.board_sizes import (
    board_sizes_reconcile,
    board_sizes_triggers_missing,
    board_sizes_uninstall,
)

pytestmark = pytest.mark.django_db

MODELS: list[type[Model]] = [AuditBoardRow, ProbeBoardRow, ChecklistBoardRow]


def _boards(model: type[Model]) -> list[dict[str, Any]]:
    """Every board (and sort group) of the table, as the filters a pager's queryset has."""
    sized = SIZED_BOARDS[model._meta.db_table]
    names = list(sized.filter_names())
    boards = list(model._default_manager.order_by().values(*names).distinct())
    if sized.sort_group:
        groups = model._default_manager.order_by().values(*names, sized.sort_group).distinct()
        boards += list(groups)
    return boards


def _counted(model: type[Model], board: dict[str, Any]) -> int:
    # A filter the stored sizes do not answer (pk >= 0): the rows are counted.
    return int(model._default_manager.filter(**board, pk__gte=0).count())


def _assert_exact() -> None:
    for model in MODELS:
        for board in _boards(model):
            queryset = model._default_manager.filter(**board)
            assert queryset.kept_size() is not None, board  # type: ignore[attr-defined]
            assert queryset.count() == _counted(model, board), (model.__name__, board)
    assert board_sizes_reconcile(fix=False) == 0


def _seed() -> None:
    seed_audit(30)
    boards_probes.seed(25)
    boards_checklist.seed(20)


def test_sizes_stay_exact_over_every_write_path() -> None:
    _seed()
    assert not board_sizes_triggers_missing()
    _assert_exact()
    # Rows moved between sort groups and between boards (UPDATE of key columns).
    audit = AuditBoardRow.objects.order_by("pk")
    AuditBoardRow.objects.filter(pk__in=list(audit.values_list("pk", flat=True)[:4])).update(
        sort_group=1
    )
    AuditBoardRow.objects.filter(pk__in=list(audit.values_list("pk", flat=True)[4:7])).update(
        judge="openai:other"
    )
    ProbeBoardRow.objects.filter(
        pk__in=list(ProbeBoardRow.objects.values_list("pk", flat=True)[:3])
    ).update(suite_version="v2")
    # An update that moves no row between boards writes no size.
    sizes_before = list(BoardSize.objects.order_by("pk").values_list("pk", "entries"))
    ChecklistBoardRow.objects.update(method_name="renamed")
    assert list(BoardSize.objects.order_by("pk").values_list("pk", "entries")) == sizes_before
    _assert_exact()
    # Deletes, one row and many, and a cascade from the scanner of an audit row.
    ChecklistBoardRow.objects.filter(pk=ChecklistBoardRow.objects.order_by("pk")[0].pk).delete()
    ProbeBoardRow.objects.filter(
        pk__in=list(ProbeBoardRow.objects.values_list("pk", flat=True)[:5])
    ).delete()
    audit.first().scanner.delete()  # type: ignore[union-attr]
    _assert_exact()
    # A board's full rewrite, as a rebuild does it: every row deleted, then bulk-created.
    (board,) = _boards(ChecklistBoardRow)
    rows = list(ChecklistBoardRow.objects.all())
    ChecklistBoardRow.objects.all().delete()
    assert ChecklistBoardRow.objects.filter(**board).count() == 0
    for row in rows:
        row.pk = None
    ChecklistBoardRow.objects.bulk_create(rows)
    _assert_exact()


def test_other_filters_are_counted() -> None:
    _seed()
    board = _boards(AuditBoardRow)[0]
    narrower = AuditBoardRow.objects.filter(**board, exact=False)
    assert narrower.kept_size() is None
    with CaptureQueriesContext(connection) as captured:
        assert narrower.count() == len(list(narrower))
    assert any('FROM "benchmarks_app_auditboardrow"' in q["sql"] for q in captured.captured_queries)
    assert AuditBoardRow.objects.filter(**board)[:5].kept_size() is None
    assert AuditBoardRow.objects.all().kept_size() is None


def test_reconcile_repairs_sizes_and_triggers() -> None:
    _seed()
    BoardSize.objects.filter(board="probes").update(entries=7)
    board_sizes_uninstall()
    assert board_sizes_triggers_missing()
    assert board_sizes_reconcile(fix=False) > 0
    assert board_sizes_reconcile() > 0
    assert not board_sizes_triggers_missing()
    boards_probes.seed(5)  # counted by the reinstalled triggers
    _assert_exact()


def test_board_pages_count_no_board_rows_for_their_pager(client: Any) -> None:
    _seed()
    pages = [
        ("/api/audit/leaderboard/?page_size=10", "benchmarks_app_auditboardrow"),
        ("/audit/", "benchmarks_app_auditboardrow"),
        ("/api/probes/leaderboard/?suite=bench-board&page_size=10", "benchmarks_app_probeboardrow"),
        (
            "/api/checklist/leaderboard/?challenge=bench-board&page_size=10",
            "benchmarks_app_checklistboardrow",
        ),
    ]
    for url, table in pages:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url, headers={"Accept": "application/json"})
        assert response.status_code == 200, url
        pager_counts = [
            q["sql"]
            for q in captured.captured_queries
            if q["sql"].startswith(f'SELECT COUNT(*) AS "__count" FROM "{table}"')
        ]
        assert pager_counts == [], url
        assert any("benchmarks_app_boardsize" in q["sql"] for q in captured.captured_queries)


@pytest.mark.parametrize(
    "value",
    [
        -1e300,
        -(2.0**40) - 1,
        -(2.0**40),
        -0.5,
        -1 / 1024,
        -1e-9,
        0.0,
        1e-9,
        1 / 1024,
        0.5,
        1 - 2**-40,
        2.0**40 - 1 / 1024,
        2.0**40,
        1e300,
    ],
)
def test_the_database_buckets_a_value_as_python_does(value: float) -> None:
    """The page's counts are exact only if the triggers' bucket of a value (SQL) is the one
    the reader computes (Python) and the bucket's edges hold it."""
    from benchmarks_app.models.board_sizes import bucket_edges, bucket_of
    from benchmarks_app.services.board_sizes import _bucket_sql

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_bucket_sql('t.v')} FROM (SELECT CAST(%s AS DOUBLE PRECISION) AS v) AS t",
            [value],
        )
        (stored,) = cursor.fetchone()
    assert stored == bucket_of(value)
    low, high = bucket_edges(stored)
    assert low <= value < high
