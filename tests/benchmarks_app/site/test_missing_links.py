"""A missing value ("—") in a board's cell is never a link (issue 37 item 8: a blue "—" link
read as a glitch and led nowhere useful); a present value keeps its link."""

from __future__ import annotations

import re

from django.test import RequestFactory

from benchmarks_app.views.tables import Column, SortableTable


def test_a_missing_value_is_plain_text_and_a_present_one_a_link() -> None:
    columns = [
        Column("name", "Name"),
        Column("method", "Method", link=lambda row: row["url"]),
    ]
    rows = [
        {"name": "with", "method": "LoRA", "url": "https://example.org/a"},
        {"name": "blank", "method": "", "url": "https://example.org/b"},
        {"name": "none", "method": None, "url": "https://example.org/c"},
    ]
    table = SortableTable(RequestFactory().get("/board/"), rows, columns)
    assert [[c.url for c in r.cells] for r in table.rows] == [
        [None, "https://example.org/a"],
        [None, None],
        [None, None],
    ]
    html = str(table.rows_html)
    assert re.findall(r'<a href="([^"]+)"[^>]*>([^<]*)</a>', html) == [
        ("https://example.org/a", "LoRA")
    ]
    assert html.count("—") == 2
