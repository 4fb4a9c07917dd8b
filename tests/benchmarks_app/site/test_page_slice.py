"""A page read by its rows' keys first (``page_slice``) holds exactly the rows, in the order,
that slicing the ordered queryset gives: any ordering, filter, or ``values()`` shape."""

from __future__ import annotations

from typing import Any

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


def _orderings() -> list[list[Any]]:
    """The board's own order, and orders by a column (JSON, missing values, reversed spans,
    several columns), each ending with the board's order and the key."""
    own = own_order(AUDIT_SHAPE)
    return [
        board_order_by([], {}, own),
        board_order_by([("tp", True)], {"tp": JsonNumber("tp")}, own),
        board_order_by([("f1", False)], {"f1": "f1"}, own),
        board_order_by([("f1", True)], {"f1": "f1"}, own),
        board_order_by([("rank_low", False)], {"rank_low": Reversed("span_high")}, own),
        board_order_by([("rank", True)], {"rank": Ordered(tuple(own[:-1]), fixed=1)}, own),
    ]


def test_pages_by_key_equal_sliced_pages() -> None:
    seed_leaderboards(37)
    rows = AuditBoardRow.objects.select_related("scanner")
    own = own_order(AUDIT_SHAPE)
    for order in _orderings():
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


def _keys_sql(queries: CaptureQueriesContext) -> str:
    return next(q["sql"] for q in queries.captured_queries if 'AS "pk"' in q["sql"])


def test_a_page_past_the_middle_is_read_from_the_far_end_and_holds_the_same_rows() -> None:
    """With the count given, a deep page is read in the reversed order (missing values too):
    the database steps over the rows after the page, and the page is the same."""
    seed_leaderboards(37)
    # Missing values, which sort last both ways, so first in the reversed order.
    some = list(AuditBoardRow.objects.order_by("pk").values_list("pk", flat=True)[::5])
    AuditBoardRow.objects.filter(pk__in=some).update(f1=None)
    rows = AuditBoardRow.objects.select_related("scanner")
    own = own_order(AUDIT_SHAPE)
    for order in _orderings():
        for qs in (rows, rows.filter(sort_group=0), rows.values("pk", "sort_a")):
            ordered = qs.order_by(*order)
            expected = list(ordered)
            total = len(expected)
            for start in range(0, total, 7):
                page = page_slice(ordered, start, start + 10, total=total)
                assert page == expected[start : start + 10], (order, start)
    ordered = rows.order_by(*own)
    total = ordered.count()
    with CaptureQueriesContext(connection) as queries:
        last = page_slice(ordered, total - 10, total, total=total)
    assert last == list(ordered)[-10:]
    # The keys query starts at the far end: no offset to step over.
    assert "OFFSET" not in _keys_sql(queries).upper() or " OFFSET 0" in _keys_sql(queries)
    with CaptureQueriesContext(connection) as queries:
        page_slice(ordered, 10, 20, total=total)
    assert f"OFFSET {10}" in _keys_sql(queries)


def test_an_order_that_does_not_end_with_the_key_is_read_from_the_start() -> None:
    """Its reverse is not its rows last first (ties keep the database's order): the far end
    is not used, whatever the count."""
    seed_leaderboards(37)
    ordered = AuditBoardRow.objects.order_by("sort_group")
    total = ordered.count()
    with CaptureQueriesContext(connection) as queries:
        page_slice(ordered, total - 10, total, total=total)
    assert f"OFFSET {total - 10}" in _keys_sql(queries)


def test_a_keys_paginator_gives_every_page_of_keys_in_order() -> None:
    """The checklist board API's pages of ids: each page holds the keys slicing gives, those
    past the middle read from the far end."""
    from benchmarks_app.selectors.board_ordering import KeysPaginator

    seed_leaderboards(37)
    own = own_order(AUDIT_SHAPE)
    keys = AuditBoardRow.objects.order_by(*board_order_by([], {}, own)).values_list("pk", flat=True)
    expected = list(keys)
    paginator = KeysPaginator(keys, 5)
    pages = [list(paginator.page(n)) for n in paginator.page_range]
    assert [pk for page in pages for pk in page] == expected
    with CaptureQueriesContext(connection) as queries:
        last = list(paginator.page(paginator.num_pages))
    assert last == expected[-len(last) :]
    assert f"OFFSET {len(expected) - len(last)}" not in _keys_sql(queries)
