"""Pages, the command line, CSV downloads and the API agree to the digits shown (issue 13).

Pages used to cut digits off (Django's ``number_format``: 0.9375 → 0.937, precision
14/235 → 5.9%) where the command line rounds (0.938, 6.0%). Every number shown is now rounded
by one rule, :func:`benchmarks_app.formatting.format_fixed` (Python's), so a raw value from a
CSV or the API, rounded to the digits a page or the CLI shows, gives those digits.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from decimal import Decimal
from typing import Any

import pytest
from django.core.management import call_command
from django.http import HttpResponse
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from benchmarks_app.demo import SAMPLE_DATA
from benchmarks_app.formatting import format_fixed, format_percent, format_score, interval_text
from benchmarks_app.views.tables import Column, SortableTable
from scoring.audit.metrics import pct as cli_pct

# Values whose last shown digit is a tie in decimal, or that truncation would get wrong.
TRICKY = [0.0595, 0.9375, 0.125, 14 / 235, 2.675, 1.0005, 0.0, 1.0]


def table(rows: list[dict[str, Any]], query: str = "") -> SortableTable:
    return SortableTable(
        RequestFactory().get(f"/{query}"),
        rows,
        [
            Column("name", "Name"),
            Column("kappa", "κ", kind="float", digits=3),
            Column("share", "Share", kind="pct", digits=3),
            Column("count", "Count", kind="int"),
        ],
        filename="rounding",
    )


@pytest.mark.parametrize("value", TRICKY)
def test_page_cells_round_like_the_command_line_and_the_csv_value(value: float) -> None:
    rows = [{"name": "x", "kappa": value, "share": value, "count": 1234}]
    cells = {
        c: cell.text
        for c, cell in zip(
            ("name", "kappa", "share", "count"), table(rows).rows[0].cells, strict=True
        )
    }
    # The CLI's three-decimal scores and the audit reports' percentages.
    assert cells["kappa"] == format_score(value) == f"{value:.3f}"
    assert cells["share"] == cli_pct(value) == format_percent(value)
    assert cells["count"] == "1,234"
    # The CSV carries the raw value; rounded to the digits shown it gives the page's digits.
    download = table(rows, "?format=csv").download()
    assert isinstance(download, HttpResponse)  # a small table's download is not streamed
    record = next(csv.DictReader(io.StringIO(download.content.decode())))
    assert format_fixed(round(float(record["kappa"]), 3), 3) == cells["kappa"]
    assert f"{round(100 * float(record['share']), 1):.1f}%" == cells["share"]
    # The JSON download too.
    json_download = table(rows, "?format=json").download()
    assert isinstance(json_download, HttpResponse)
    body = json.loads(json_download.content)
    assert format_fixed(body["results"][0]["kappa"], 3) == cells["kappa"]


def test_rounding_is_never_truncation() -> None:
    # 0.9375 is exact in binary: rounding gives ...8, cutting off gives ...7.
    assert format_fixed(0.9375, 3) == "0.938"
    assert format_percent(0.9375, 1) == "93.8%"
    # A value just above a tie rounds up, one just below rounds down.
    assert format_fixed(0.12350001, 3) == "0.124" and format_fixed(0.12349999, 3) == "0.123"
    assert format_fixed(Decimal("0.0595"), 3) == "0.060"  # a Decimal is rounded as stored
    assert format_fixed(1234567.891, 2, grouping=True) == "1,234,567.89"
    assert (
        interval_text(0.0595, 0.9375) == f"{format_fixed(0.0595, 3)}\u2013{format_fixed(0.9375, 3)}"
    )


def _cell(page: str, row_name: str, column_index: int) -> str:
    """The text of one cell of the board row whose first link is ``row_name``."""
    for row in re.findall(r"<tr\b.*?</tr>", page, flags=re.S):
        if f">{row_name}<" in row:
            cells = re.findall(r"<td\b[^>]*>(.*?)</td>", row, flags=re.S)
            return html.unescape(re.sub(r"<[^>]+>", "", cells[column_index])).strip()
    raise AssertionError(f"no row {row_name!r} on the page")


@pytest.mark.django_db
def test_audit_board_page_cli_csv_and_api_show_the_same_digits(
    client: Client, api: APIClient
) -> None:
    call_command("import_audit", str(SAMPLE_DATA / "audit"), stdout=io.StringIO())
    call_command(
        "evaluate_audit",
        "--scanner",
        "baseline",
        "--judge",
        "offline",
        "--wait",
        stdout=io.StringIO(),
    )
    response = client.get("/audit/")
    assert response.status_code == 200
    table_ = response.context["table"]
    keys = [c.key for c in table_.columns]
    row = next(r for r in table_.rows if r.source["scanner"] == "baseline")
    offset = 1 if table_.show_rank else 0
    # The page leaves out the columns only downloads carry (``Column.page``).
    page_keys = [c.key for c in table_.columns if c.page]
    page = response.content.decode()
    shown = {
        key: _cell(page, "baseline", offset + page_keys.index(key))
        for key in ("precision", "recall", "f1", "f1_with_partial")
    }
    assert shown["precision"] == row.cells[keys.index("precision")].text

    # CLI: audit_report's ALL row (markdown) shows precision, recall and F1 as the page does.
    out = io.StringIO()
    call_command(
        "audit_report", "--scanner", "baseline", "--judge", "offline", "--format", "md", stdout=out
    )
    all_row = next(line for line in out.getvalue().splitlines() if line.startswith("| **ALL**"))
    cli_cells = [c.strip().strip("*") for c in all_row.strip("|").split("|")]
    assert shown["precision"] in cli_cells and shown["recall"] in cli_cells
    assert shown["f1"] in cli_cells
    # audit_leaderboard's text line shows F1+ as the page does.
    out = io.StringIO()
    call_command("audit_leaderboard", "--judge", "offline", stdout=out)
    assert f"F1+ {shown['f1_with_partial']} " in out.getvalue()

    # CSV download and API: raw values that round to the digits shown.
    # The board pages stream their downloads (the whole board, memory flat).
    download = client.get("/audit/?format=csv").getvalue().decode()
    csv_rows = list(csv.DictReader(io.StringIO(download)))
    raw = next(r for r in csv_rows if r["scanner"] == "baseline")
    api_rows = api.get("/api/audit/leaderboard/").json()["results"]
    from_api = next(r for r in api_rows if r["scanner"] == "baseline")
    for key, text in shown.items():
        # Rounded to one decimal of a percentage, as the page and the CLI show them.
        assert f"{round(100 * float(raw[key]), 1):.1f}%" == text, key
        assert format_percent(from_api[key]) == text, key


def test_the_checklist_entry_page_rounds_like_the_cli(admin_client) -> None:
    """0.125 is an exact tie: Python's rule (and the CLI) shows 0.12; floatformat said 0.13."""
    from benchmarks_app.models import ChecklistScore, RunStatus
    from tests.factories.common import ChecklistRunFactory, ChecklistSubmissionFactory

    entry = ChecklistSubmissionFactory.create()
    run = ChecklistRunFactory.create(checklist_submission=entry, status=RunStatus.SUCCEEDED)
    ChecklistScore.objects.create(
        run=run, submission=entry, c_g=0.125, c_a=0.375, c_t=1.0, r=0.0, s=0.125
    )
    page = admin_client.get(f"/checklist/submissions/{entry.pk}/").content.decode()
    assert f">{format_fixed(0.125, 2)}<" in page and format_fixed(0.125, 2) == "0.12"
    assert ">0.38<" in page  # 0.375 rounds to the even 0.38
    assert ">0.13<" not in page
