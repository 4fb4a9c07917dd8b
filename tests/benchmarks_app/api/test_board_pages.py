"""Board pages read from stored rows (``BoardRowListView``, here the audit board): ordered and
paged by the database, missing values last both ways, pages that never overlap, the same
number of queries whatever the number of entrants, and a 400 naming an unknown field."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from benchmarks_app.bench.boards_audit import seed_audit_board
from benchmarks_app.models import Scanner
from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, own_order

pytestmark = pytest.mark.django_db

URL = "/api/audit/leaderboard/"


def page(api: APIClient, **params: Any) -> dict[str, Any]:
    answer = api.get(URL, params)
    assert answer.status_code == 200, answer.content[:300]
    body = answer.json()
    assert set(body) == {"count", "next", "previous", "results"}
    return dict(body)


def every_row(api: APIClient, **params: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    number = 1
    while True:
        body = page(api, page=number, page_size=7, **params)
        rows += body["results"]
        if body["next"] is None:
            return rows
        number += 1


def test_the_default_order_is_the_board_order_and_pages_do_not_overlap(api: APIClient) -> None:
    seed_audit_board(40)
    rows = every_row(api)
    stored = list(
        AuditBoardRow.objects.order_by(*own_order(AUDIT_SHAPE)).values_list(
            "scanner__name", flat=True
        )
    )
    assert [r["scanner"] for r in rows] == stored and len(set(stored)) == 40
    ranked = [r["rank"] for r in rows if r["complete"]]
    assert ranked == sorted(ranked) and all(not r["complete"] for r in rows[len(ranked) :])


@pytest.mark.parametrize("field", ["precision", "f1", "tp", "f1_with_partial"])
def test_missing_values_come_last_in_both_directions(api: APIClient, field: str) -> None:
    seed_audit_board(60)  # one in twenty reported nothing: no precision, F1 or F1+
    for prefix in ("", "-"):
        values = [r[field] for r in every_row(api, ordering=prefix + field)]
        missing = [v is None for v in values]
        assert missing == sorted(missing), f"{prefix}{field}: a missing value before a value"
        present = [v for v in values if v is not None]
        assert present == sorted(present, reverse=prefix == "-")
    if field == "precision":
        assert any(v is None for v in values)


def test_ties_keep_the_board_order_so_that_pages_are_stable(api: APIClient) -> None:
    seed_audit_board(50)
    rows = every_row(api, ordering="-complete")
    assert len({r["scanner"] for r in rows}) == 50
    complete = [r for r in rows if r["complete"]]
    assert [r["rank"] for r in complete] == sorted(r["rank"] for r in complete)


def test_scanner_names_sort_without_regard_to_case(api: APIClient) -> None:
    seed_audit_board(5)
    Scanner.objects.filter(name="board-scanner-00002").update(name="Board-scanner-00002-B")
    names = [r["scanner"] for r in every_row(api, ordering="scanner")]
    assert names == sorted(names, key=str.casefold) and names != sorted(names)


def test_the_older_name_of_a_field_still_orders(api: APIClient) -> None:
    seed_audit_board(30)
    assert [r["scanner"] for r in every_row(api, ordering="repos")] == [
        r["scanner"] for r in every_row(api, ordering="repos_evaluated")
    ]


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ({"ordering": "bogus"}, "unknown field 'bogus'"),
        ({"ordering": "-tp,nope"}, "unknown field 'nope'"),
        ({"ordering": ["tp", "fp"]}, "give it once"),
    ],
)
def test_a_bad_ordering_is_a_400_naming_it(api: APIClient, query: Any, problem: str) -> None:
    seed_audit_board(3)
    answer = api.get(URL, query)
    assert answer.status_code == 400
    assert problem in str(answer.json())


@pytest.mark.parametrize("ordering", ["", "-tp", "scanner"])
def test_a_page_costs_the_same_queries_at_any_size(api: APIClient, ordering: str) -> None:
    seed_audit_board(10)
    with CaptureQueriesContext(connection) as small:
        page(api, ordering=ordering)
    counted = len(small.captured_queries)
    Scanner.objects.all().delete()
    seed_audit_board(300, seed=8)
    with CaptureQueriesContext(connection) as large:
        body = page(api, ordering=ordering)
    assert body["count"] == 300 and len(body["results"]) == 50
    assert len(large.captured_queries) == counted


@pytest.mark.parametrize("ordering", ["", "-tp"])
@pytest.mark.parametrize("counted", [True, False])
def test_the_largest_pages_carry_the_whole_boards_marks(
    api: APIClient, ordering: str, counted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of 500 rows (the largest) has its places and ranks counted on the board's
    indexes on a board many times its size, and ranked in memory on a smaller one: either
    way they are the marks of the whole board ranked in memory, on the first page and on a
    page that ends the board, in the board's order and sorted by a column."""
    from benchmarks_app.bench.boards_seed import seed_audit
    from benchmarks_app.selectors import board_marks
    from benchmarks_app.selectors.audit import audit_leaderboard

    seed_audit(700)  # ties in TP and F1+, one entry in ten incomplete
    if counted:  # as if the board were more than this many times the page
        monkeypatch.setattr(board_marks, "IN_MEMORY_BOARD_PER_ROW", 1)
    whole = {r["scanner"]: r for r in audit_leaderboard()}
    params = {"page_size": 500, **({"ordering": ordering} if ordering else {})}
    with CaptureQueriesContext(connection) as queries:
        first = page(api, **params)
    counts = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT (SELECT") and "COUNT(*)" in q["sql"]
    ]
    # Counted: a statement of listed slices (a VALUES list; on PostgreSQL arrays unnested,
    # so the statement's text does not grow with them), each request's slices one subquery
    # run per row (500 rows' thresholds in a few subqueries, not one each); none when read
    # whole.
    assert len(counts) >= 1 if counted else counts == []
    listing = "FROM unnest(" if connection.vendor == "postgresql" else "FROM (VALUES"
    assert all(listing in sql for sql in counts)
    rows = first["results"] + page(api, page=2, **params)["results"]
    assert len(rows) == len(whole) == 700
    for row in rows:
        expected = whole[row["scanner"]]
        got = (row["rank"], row["rank_low"], row["rank_high"])
        assert got == (expected["rank"], expected["rank_low"], expected["rank_high"])
