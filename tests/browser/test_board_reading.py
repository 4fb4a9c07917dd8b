"""One board, one reading (issue 37): at 1,280 px each board shows one rank range and one tie
column, a forest plot beside the table, and ticking two rows opens their comparison, with no
JavaScript and nothing the CSP blocks."""

from __future__ import annotations

import re
from typing import Any

import pytest

from benchmarks_app.bench.api import seed_leaderboards
from tests.browser.conftest import SCREENSHOTS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

DESKTOP = {"width": 1280, "height": 900}
BOARDS = [
    # (page, the board table, the row's name column, the entries' names)
    ("/audit/", "table#audit-leaderboard-table", "Scanner", "scanner-"),
    ("/checklist/?challenge=bench", "table#checklist-leaderboard", "Team", "team-"),
    ("/probes/", ".probe-board table.sortable", "Model", "model-"),
]


@pytest.mark.parametrize(("path", "table", "name_header", "prefix"), BOARDS)
def test_a_board_reads_once_draws_a_forest_plot_and_compares_two_ticked_rows(
    browser: Any,
    live_server: Any,
    migrated_data: None,
    path: str,
    table: str,
    name_header: str,
    prefix: str,
) -> None:
    seed_leaderboards(6)
    context = browser.new_context(base_url=live_server.url, viewport=DESKTOP, locale="en-US")
    context.set_default_timeout(15_000)
    page = context.new_page()
    blocked: list[str] = []
    page.on(
        "console",
        lambda message: (
            blocked.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    page.goto(path)
    labels = [t.strip(" ↕▲▼") for t in page.locator(f"{table} thead th:visible").all_inner_texts()]
    assert labels.count("Rank range") == 1 and labels.count("Tied") == 1, labels
    assert not any(label.startswith("Paired") for label in labels), labels
    # Compact by default: the board fits 1,280 px without sideways scrolling.
    scroller = page.locator(table).first.locator("xpath=ancestor::div[@class='scroll-x'][1]")
    width = scroller.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert width[0] <= width[1], (labels, width)
    # One legend line says how the marks were read.
    legend = page.locator(".mark-legend").first
    assert "Rank range and Tied read" in legend.inner_text()

    # The forest plot sits beside the table: one dot per ranked row with a value.
    plot = page.locator("svg.forest-plot").first
    assert plot.is_visible()
    dots = plot.locator(".dot").count()
    values = page.locator(f"{table} tbody tr").count()
    assert 1 <= dots <= values
    table_box = page.locator(table).first.bounding_box()
    plot_box = plot.bounding_box()
    assert table_box and plot_box and plot_box["x"] >= table_box["x"] + table_box["width"] - 1
    page.screenshot(path=str(SCREENSHOTS / f"board-reading-{path.strip('/').split('/')[0]}.png"))

    # Tick two rows and compare them.
    rows = page.locator(f"{table} tbody tr")
    names = []
    for index in (0, 1):
        row = rows.nth(index)
        row.locator("td.pick input[type=checkbox]").check()
        names.append(row.locator("td").nth(1).inner_text().strip())
    assert all(n.startswith(prefix) for n in names), names
    page.get_by_role("button", name="Compare the two ticked rows").first.click()
    page.wait_for_url(re.compile(r".*/boards/compare/\?.*"))
    heading = page.locator("h1").inner_text()
    assert names[0] in heading and names[1] in heading, heading
    entries = page.locator("#compare-result table.compare-entries")
    assert entries.is_visible()
    # The board's metric, by the board's name for it.
    metric = {"Scanner": "F1+", "Team": "S", "Model": "Resilience index"}[name_header]
    assert metric in entries.locator("thead").inner_text()
    assert "f1_with_partial" not in page.content()
    page.get_by_role("link", name="← Back to the board").click()
    page.wait_for_load_state()
    assert page.locator(table).count() == 1
    assert not blocked, blocked
    context.close()


def test_a_bad_compare_link_is_a_friendly_page(browser: Any, live_server: Any) -> None:
    context = browser.new_context(base_url=live_server.url, viewport=DESKTOP)
    page = context.new_page()
    response = page.goto("/boards/compare/?board=probes:1:-:x&a=999999&b=999998")
    assert response is not None and response.status == 404
    text = page.locator("main, body").first.inner_text()
    assert "a: no entry 999999" in text and "Traceback" not in text
    assert page.get_by_role("link", name="probe", exact=True).count() == 1
    context.close()
