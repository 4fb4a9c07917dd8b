"""Issue 27 on the bundled audit data: paired marks of an audit board from its truth results."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, own_order
from benchmarks_app.selectors.paired import BoardKey, board_items
from benchmarks_app.services.paired import board_paired_refresh
from tests.benchmarks_app.audit.test_boards import AUDIT, SLUG, leaderboard_json, submit_dataset

pytestmark = pytest.mark.django_db


def test_audit_items_reproduce_the_board_and_identical_scanners_tie(user: Any) -> None:
    call_command("import_audit", str(AUDIT), "--dataset", SLUG, stdout=io.StringIO())
    api = APIClient()
    api.force_authenticate(user)
    submit_dataset(api, "tool-a")
    submit_dataset(api, "tool-b")
    rows = list(AuditBoardRow.objects.filter(phase=None).order_by(*own_order(AUDIT_SHAPE)))
    assert len(rows) == 2
    key = BoardKey("audit", rows[0].release_id, None, rows[0].judge)
    items = board_items("audit", [r.pk for r in rows])
    for row in rows:
        keys, entry = items[row.pk]
        # One unit per truth finding of the release, and the board's own F1+ on all of them.
        assert len(keys) == 188
        value = entry.statistic(entry.matrix.sum(axis=0)[None, :])[0]
        assert value == pytest.approx(row.f1_with_partial)
    result = board_paired_refresh(board=key)
    assert (result.ranked, result.marked, result.tested_pairs) == (2, 2, 1)
    a, b = AuditBoardRow.objects.filter(phase=None).order_by(*own_order(AUDIT_SHAPE))
    assert (a.paired_rank_low, a.paired_rank_high, a.paired_tied) == (1, 2, False)
    assert (b.paired_rank_low, b.paired_rank_high, b.paired_tied) == (1, 2, True)
    document = leaderboard_json()
    assert [r["paired_tied"] for r in document["rows"]] == [False, True]
    out = io.StringIO()
    call_command("audit_leaderboard", "--dataset", SLUG, stdout=out)
    assert "paired ranks 1-2 ≈ tied" in out.getvalue()
    same = api.get(
        "/api/boards/compare/", {"board": str(key), "a": str(a.pk), "b": str(b.pk)}
    ).json()
    assert (same["difference"], same["low"], same["high"]) == (0.0, 0.0, 0.0)
