"""A page read by its rows' keys first (``page_slice``) holds exactly the rows, in the order,
that slicing the ordered queryset gives: any ordering, filter, or ``values()`` shape."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchmarks_app.bench.api import seed_leaderboards
from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, own_order
from benchmarks_app.selectors.board_ordering import (
    JsonNumber,
    Ordered,
    Reversed,
    board_order_by,
    page_slice,
)

pytestmark = pytest.mark.django_db


def test_pages_by_key_equal_sliced_pages() -> None:
    seed_leaderboards(37)
    rows = AuditBoardRow.objects.select_related("scanner")
    own = own_order(AUDIT_SHAPE)
    orderings = [
        board_order_by([], {}, own),
        board_order_by([("tp", True)], {"tp": JsonNumber("tp")}, own),
        board_order_by([("f1", False)], {"f1": "f1"}, own),
        board_order_by([("rank_low", False)], {"rank_low": Reversed("span_high")}, own),
        board_order_by([("rank", True)], {"rank": Ordered(tuple(own[:-1]), fixed=1)}, own),
    ]
    for order in orderings:
        for qs in (rows, rows.filter(sort_group=0), rows.values("pk", "sort_a")):
            ordered = qs.order_by(*order)
            expected = list(ordered)
            assert len(expected) > 10
            for start, stop in [(0, 10), (10, 20), (30, 40), (35, 50), (60, 70)]:
                assert page_slice(ordered, start, stop) == expected[start:stop]
    # Two queries (the keys, then the rows), the related rows selected with them.
    with CaptureQueriesContext(connection) as queries:
        names = [r.scanner.name for r in page_slice(rows.order_by(*own), 30, 40)]
    assert len(queries.captured_queries) == 2
    assert names == [r.scanner.name for r in rows.order_by(*own)[30:40]]
