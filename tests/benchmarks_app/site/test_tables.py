"""The shared sortable table: ordering with missing values last, ranks, downloads."""

from __future__ import annotations

import csv
import io
import json
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import RequestFactory

from benchmarks_app.views.tables import Column, SortableTable, infer_columns

ROWS = [
    {"name": "alpha", "score": 0.9, "runs": 3},
    {"name": "beta", "score": None, "runs": 10},
    {"name": '=HYPERLINK("x")', "score": 0.5, "runs": 1},
    {"name": "delta", "score": 0.7, "runs": None},
]
COLUMNS = [
    Column("name", "Name"),
    Column("score", "Score", kind="pct"),
    Column("runs", "Runs", kind="int"),
]


def table(query: str = "", **kwargs):
    request = RequestFactory().get(f"/board/{query}")
    return SortableTable(request, ROWS, COLUMNS, filename="Demo board", **kwargs)


def names(t) -> list[str]:
    return [row.source["name"] for row in t.rows]


def test_rows_keep_their_given_order_and_rank_by_default():
    t = table()
    assert names(t) == ["alpha", "beta", '=HYPERLINK("x")', "delta"]
    assert [r.rank for r in t.rows] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?sort=score", ['=HYPERLINK("x")', "delta", "alpha", "beta"]),
        ("?sort=-score", ["alpha", "delta", '=HYPERLINK("x")', "beta"]),
        ("?sort=-runs", ["beta", "alpha", '=HYPERLINK("x")', "delta"]),
        ("?sort=runs", ['=HYPERLINK("x")', "alpha", "beta", "delta"]),
    ],
)
def test_sorting_puts_missing_values_last_in_both_directions(query, expected):
    t = table(query)
    assert names(t) == expected
    # Ranks stay attached to the entries: re-sorting does not renumber them.
    assert {r.source["name"]: r.rank for r in t.rows}["alpha"] == 1


def test_unknown_sort_key_falls_back_to_given_order():
    assert names(table("?sort=drop%20table")) == names(table())


def test_header_links_toggle_direction_and_keep_other_parameters():
    t = table("?sort=-score&suite=demo")
    score = next(h for h in t.headers if h.column.key == "score")
    assert score.direction == "desc"
    assert score.aria_sort == "descending"
    params = parse_qs(urlsplit(score.sort_url).query)
    assert params == {"sort": ["score"], "suite": ["demo"]}
    runs = next(h for h in t.headers if h.column.key == "runs")
    assert parse_qs(urlsplit(runs.sort_url).query)["sort"] == ["-runs"]  # numbers: best first
    name = next(h for h in t.headers if h.column.key == "name")
    assert parse_qs(urlsplit(name.sort_url).query)["sort"] == ["name"]  # text: A to Z


def test_cells_are_formatted_and_aligned():
    cells = table().rows[0].cells
    assert [c.text for c in cells] == ["alpha", "90.0%", "3"]
    assert [c.numeric for c in cells] == [False, True, True]
    assert table().rows[1].cells[1].text == "—"


def test_csv_download_has_raw_values_in_shown_order_and_defuses_formulas():
    response = table("?sort=-score&format=csv").download()
    assert response is not None
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == 'attachment; filename="demo-board.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["name"] for r in rows][:2] == ["alpha", "delta"]
    assert rows[0] == {"rank": "1", "name": "alpha", "score": "0.9", "runs": "3"}
    assert rows[-1]["score"] == ""
    assert rows[2]["name"].startswith("'=")


def test_json_download_keeps_types_and_nulls():
    response = table("?sort=score&format=json").download()
    assert response is not None
    body = json.loads(response.content)
    assert body["count"] == 4
    assert body["results"][0] == {"rank": 3, "name": '=HYPERLINK("x")', "score": 0.5, "runs": 1}
    assert body["results"][-1]["score"] is None


def test_prefix_separates_tables_on_one_page():
    t = table("?audit-sort=runs&sort=name&audit-format=json", prefix="audit")
    assert names(t)[0] == '=HYPERLINK("x")'
    assert table("?format=json", prefix="audit").download() is None
    assert t.download() is not None
    assert "audit-format=csv" in t.csv_url


def test_limit_keeps_the_top_rows_after_sorting():
    assert names(table("?sort=-runs", limit=2)) == ["beta", "alpha"]


def test_rows_that_carry_their_own_rank_keep_it():
    rows = [{"model": "m1", "rank": 1}, {"model": "m2", "rank": 1}, {"model": "m3", "rank": 2}]
    request = RequestFactory().get("/")
    t = SortableTable(request, rows, [Column("model", "Model")])
    assert [r.rank for r in t.rows] == [1, 1, 2]


def test_unavailable_rows_render_as_empty():
    t = SortableTable(RequestFactory().get("/"), None, COLUMNS)
    assert t.rows == [] and t.available is False


def test_columns_can_be_inferred_from_dict_rows():
    columns = infer_columns(
        [{"name": "a", "score": None, "n": 2, "nested": {"x": 1}}, {"score": 0.5}]
    )
    assert [(c.key, c.kind) for c in columns] == [
        ("name", "text"),
        ("score", "float"),
        ("n", "int"),
    ]


@pytest.mark.parametrize(
    "name", ["tool", "a b", "naïve-π", "50%", "x?y#z", "a&b=c", "9876543210123"]
)
def test_row_url_is_what_reverse_gives(name):
    from django.urls import reverse

    from benchmarks_app.views.tables import row_url

    assert row_url("audit:scanner", name) == reverse("audit:scanner", args=[name])
    assert row_url("probes:submission", 42) == reverse("probes:submission", args=[42])
