"""A page read by its rows' keys first (``page_slice``) holds exactly the rows, in the order,
that slicing the ordered queryset gives: any ordering, filter, or ``values()`` shape."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchmarks_app.bench.api import seed_leaderboards
from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.selectors.board_ordering import JsonNumber, board_order_by, page_slice

pytestmark = pytest.mark.django_db


def test_pages_by_key_equal_sliced_pages() -> None:
    seed_leaderboards(37)
    rows = AuditBoardRow.objects.select_related("scanner")
    orderings = [
        board_order_by([], {}),
        board_order_by([("tp", True)], {"tp": JsonNumber("tp")}),
        board_order_by([("f1", False)], {"f1": "f1"}),
    ]
    for order in orderings:
        for qs in (rows, rows.filter(is_complete__in=[True]), rows.values("pk", "position")):
            ordered = qs.order_by(*order)
            expected = list(ordered)
            assert len(expected) > 10
            for start, stop in [(0, 10), (10, 20), (30, 40), (35, 50), (60, 70)]:
                assert page_slice(ordered, start, stop) == expected[start:stop]
    # Two queries (the keys, then the rows), the related rows selected with them.
    with CaptureQueriesContext(connection) as queries:
        names = [r.scanner.name for r in page_slice(rows.order_by("position", "pk"), 30, 40)]
    assert len(queries.captured_queries) == 2
    assert names == [r.scanner.name for r in rows.order_by("position", "pk")[30:40]]
