# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Submit-then-withdraw does not escape the quota, and withdrawn papers leave the disk.

Issue 11 item 7: 7 of 8 uploads were accepted with a daily limit of 3.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.utils import timezone

from benchmarks_app.models import ChecklistSubmission, Paper
from benchmarks_app.selectors.checklist import checklist_quota
from benchmarks_app.services.checklist import (
    NotAllowed,
    QuotaExceeded,
    checklist_submission_create,
    checklist_submission_discard,
)
from tests.factories.checklist import MembershipFactory

pytestmark = pytest.mark.django_db


def test_submit_then_withdraw_stays_within_the_daily_limit(genuine_tex) -> None:
    m = MembershipFactory(team__challenge__daily_limit=3, team__challenge__total_limit=20)
    accepted = refused = 0
    for _ in range(8):
        try:
            sub = checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})
        except QuotaExceeded:
            refused += 1
            continue
        accepted += 1
        checklist_submission_discard(submission=sub)
    assert (accepted, refused) == (3, 5)
    quota = checklist_quota(team=m.team)
    # The withdrawals free their slots of the total, not today's.
    assert (quota.used_today, quota.used_total, quota.remaining) == (3, 0, 0)


def test_yesterdays_withdrawals_do_not_count_today(genuine_tex) -> None:
    m = MembershipFactory(team__challenge__daily_limit=1, team__challenge__total_limit=20)
    sub = checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})
    checklist_submission_discard(submission=sub)
    ChecklistSubmission.objects.filter(pk=sub.pk).update(
        created_at=timezone.now() - timedelta(days=1)
    )
    assert checklist_quota(team=m.team).remaining == 1
    checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})


def test_withdrawn_files_are_deleted_after_commit(
    genuine_tex, django_capture_on_commit_callbacks
) -> None:
    m = MembershipFactory(team__challenge__daily_limit=3, team__challenge__total_limit=20)
    sub = checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})
    name = Paper.objects.get(submission=sub).file.name
    assert name and default_storage.exists(name)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        checklist_submission_discard(submission=sub)
    # Not before the withdrawal commits: a rollback would keep the row and its file.
    assert default_storage.exists(name)
    for callback in callbacks:
        callback()
    assert not default_storage.exists(name)
    paper = Paper.objects.get(submission=sub)
    assert not paper.file
    assert paper.extracted_text  # the row stays, with what was read, for the team's history


def test_only_unassessed_submissions_can_be_withdrawn(genuine_tex) -> None:
    m = MembershipFactory(team__challenge__daily_limit=3, team__challenge__total_limit=20)
    sub = checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})
    checklist_submission_discard(submission=sub)
    with pytest.raises(NotAllowed):
        checklist_submission_discard(submission=sub)
