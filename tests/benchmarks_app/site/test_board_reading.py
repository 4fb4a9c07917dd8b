"""One board, one reading (issue 37) on the pages: one rank range and tie column with its
legend, the checklist's genuine-only entry read as not measured and placed by rule, "you are
here" rows, and the compare page reached from a board's ticks."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest
from django.test import Client

from benchmarks_app.bench.api import seed_leaderboards
from benchmarks_app.models import (
    ChecklistBoardRow,
    Membership,
    PairedBoardSummary,
    ProbeBoardRow,
    Scanner,
    SubmissionKind,
)
from benchmarks_app.selectors.paired import BoardKey
from benchmarks_app.services.paired import board_paired_refresh
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db


def _row_html(page: str, name: str) -> str:
    found = re.search(rf"<tr\b[^>]*>(?:(?!</tr>).)*{re.escape(name)}(?:(?!</tr>).)*</tr>", page)
    assert found is not None, name
    return found.group(0)


def test_a_genuine_only_entry_reads_not_measured_and_placed_by_rule() -> None:
    seed_leaderboards(3)
    row = ChecklistBoardRow.objects.get(team__name="team-0002")
    ChecklistBoardRow.objects.filter(pk=row.pk).update(
        kind=SubmissionKind.GENUINE_ONLY, s=0.0, c_a=0.0, c_t=0.0, r=1.0
    )
    page = Client().get("/checklist/?challenge=bench").content.decode()
    genuine_only = _row_html(page, "team-0002")
    assert "below by rule" in genuine_only
    # C_A, C_T and R: "—", not 0.000, 0.000 and 1.000 as if measured.
    assert "1.000" not in genuine_only and genuine_only.count("—") >= 3
    assert "below by rule" not in _row_html(page, "team-0000")
    response = Client().get("/checklist/?challenge=bench&format=csv")
    download = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    records = {r["team"]: r for r in csv.DictReader(io.StringIO(download))}
    assert records["team-0002"]["c_a"] == records["team-0002"]["r"] == ""
    assert records["team-0000"]["c_a"] != ""
    # The former readings stay in downloads under their own keys.
    assert {"overlap_rank_range", "overlap_tied", "paired_range", "paired_tied"} <= set(
        records["team-0000"]
    )


def test_the_legend_says_which_reading_and_how_many_pairs_holm_corrected() -> None:
    seed_leaderboards(4)
    page = Client().get("/probes/").content.decode()
    assert "the paired rule has not been computed for this board yet" in page
    assert page.count('data-key="rank_range"') == 1 and "Paired ranks" not in page
    row = ProbeBoardRow.objects.first()
    assert row is not None
    key = BoardKey("probes", row.suite_id, None, row.suite_version)
    board_paired_refresh(board=key)
    summary = PairedBoardSummary.objects.get(board=str(key))
    page = Client().get("/probes/").content.decode()
    legend = re.search(r'class="small muted mark-legend"[^>]*>([^<]*)<', page)
    assert legend is not None
    assert "Rank range and Tied read the paired rule" in legend.group(1)
    assert f"{summary.tested_pairs} pair" in legend.group(1) and "Holm" in legend.group(1)


def test_each_board_highlights_the_readers_own_rows() -> None:
    seed_leaderboards(3)
    user: Any = UserFactory()
    Scanner.objects.filter(name="scanner-0001").update(owner=user)
    ProbeBoardRow.objects.filter(model_name="model-0001").update(owner=user)
    team = ChecklistBoardRow.objects.get(team__name="team-0001").team
    Membership.objects.create(team=team, user=user, challenge=team.challenge)
    client = Client()
    client.force_login(user)
    for path, name in (
        ("/audit/", "scanner-0001"),
        ("/probes/", "model-0001"),
        ("/checklist/?challenge=bench", "team-0001"),
    ):
        page = client.get(path).content.decode()
        assert page.count('<tr class="mine"') == 1, path
        assert 'class="mine"' in _row_html(page, name), path
        assert Client().get(path).content.decode().count('class="mine"') == 0


def test_two_ticked_rows_open_their_comparison_in_the_boards_words() -> None:
    seed_leaderboards(3)
    page = Client().get("/audit/").content.decode()
    picked = re.findall(
        r'<input type="checkbox" name="row" value="(\d+)" form="[^"]+" '
        r'aria-label="Compare ([^"]+)"',
        page,
    )
    assert len(picked) == 3
    ticks = [pk for pk, _ in picked]
    names = [name for _, name in picked]
    board = re.search(r'name="board" value="([^"]+)"', page)
    assert board is not None and board.group(1).startswith("audit:")
    shown = Client().get("/boards/compare/", {"board": board.group(1), "row": ticks[:2]})
    text = shown.content.decode()
    assert shown.status_code == 200
    assert names[0] in text and names[1] in text
    # The board's name and unit for its metric, not the stored field's.
    assert "F1+" in text and "%" in text and "f1_with_partial" not in text
    # Seeded entries have no per-item results: shown side by side, with why no difference.
    assert "No paired difference for these two" in text
    one = Client().get("/boards/compare/", {"board": board.group(1), "row": ticks[:1]})
    assert one.status_code == 400 and "row: tick exactly two entries" in one.content.decode()
    missing = Client().get("/boards/compare/", {"board": board.group(1), "a": "999999", "b": "1"})
    body = missing.content.decode()
    assert missing.status_code == 404
    assert "a: no entry 999999" in body and 'href="/audit/"' in body
