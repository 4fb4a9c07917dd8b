# mypy: disable-error-code="arg-type"
"""Issue 27 on the checklist: per-question items read back from the assessments."""

from __future__ import annotations

import pytest

from benchmarks_app.models import ChecklistBoardRow, PairedRefresh
from benchmarks_app.selectors.board_marks import CHECKLIST_SHAPE, own_order
from benchmarks_app.selectors.paired import board_items
from benchmarks_app.services.checklist import (
    checklist_submission_assess,
    checklist_submission_create,
)
from scoring.checklist.questions import QUESTION_NUMBERS
from tests.factories.checklist import ChallengeFactory, MembershipFactory

pytestmark = pytest.mark.django_db


def test_two_teams_with_the_same_papers_tie_by_the_paired_rule(
    demo_triplet, django_capture_on_commit_callbacks
) -> None:
    challenge = ChallengeFactory()
    for _ in range(2):
        m = MembershipFactory(team__challenge=challenge)
        with django_capture_on_commit_callbacks(execute=True):
            sub = checklist_submission_create(team=m.team, user=m.user, files=demo_triplet)
            checklist_submission_assess(submission=sub, user=m.user)
    rows = list(ChecklistBoardRow.objects.order_by(*own_order(CHECKLIST_SHAPE)))
    assert len(rows) == 2
    items = board_items("checklist", [r.pk for r in rows])
    for row in rows:
        keys, entry = items[row.pk]
        assert keys == QUESTION_NUMBERS
        # S on all 15 questions, as the board stores it.
        value = entry.statistic(entry.matrix.sum(axis=0)[None, :])[0]
        assert value == pytest.approx(row.s)
    # The run's end asked for the paired marks; the task computed them.
    assert not PairedRefresh.objects.exists()
    first, second = rows
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.paired_rank_low, first.paired_tied) == (1, False)
    assert (second.paired_rank_low, second.paired_rank_high, second.paired_tied) == (1, 2, True)
