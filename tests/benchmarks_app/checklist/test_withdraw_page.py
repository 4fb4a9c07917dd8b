# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Withdrawing on the site: asked first, one true sentence about the quota, and the entry
listed as Withdrawn (issue 26, item 5)."""

from __future__ import annotations

import re

import pytest
from django.core.files.storage import default_storage
from django.urls import reverse

from benchmarks_app.models import ChecklistSubmission, Paper, SubmissionStatus
from benchmarks_app.selectors.checklist import QUOTA_RULE, checklist_quota
from benchmarks_app.services.checklist import checklist_submission_create
from tests.factories.checklist import MembershipFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def extracted(genuine_tex, client):  # type: ignore[no-untyped-def]
    m = MembershipFactory(team__challenge__daily_limit=3, team__challenge__total_limit=20)
    sub = checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})
    client.force_login(m.user)
    return m, sub


def test_withdraw_asks_before_deleting_anything(client, extracted) -> None:  # type: ignore[no-untyped-def]
    _m, sub = extracted
    name = Paper.objects.get(submission=sub).file.name
    detail = client.get(reverse("checklist:submission-detail", args=[sub.pk])).content.decode()
    # The page's Withdraw is a link to the question, not a button that deletes at once.
    url = reverse("checklist:submission-withdraw", args=[sub.pk])
    assert f'href="{url}" id="withdraw"' in detail
    for answer in (client.get(url), client.post(url)):
        page = answer.content.decode()
        assert answer.status_code == 200 and 'id="confirm-withdraw"' in page
        assert "deleted" in page and QUOTA_RULE in page
    sub.refresh_from_db()
    assert sub.status == SubmissionStatus.EXTRACTED and default_storage.exists(name)


def test_confirmed_withdrawal_says_what_the_quota_does_and_reads_withdrawn(
    client, extracted, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    m, sub = extracted
    url = reverse("checklist:submission-withdraw", args=[sub.pk])
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(url, {"confirm": "1"}, follow=True)
    page = answer.content.decode()
    sub.refresh_from_db()
    assert sub.status == SubmissionStatus.WITHDRAWN and sub.get_status_display() == "Withdrawn"
    assert not Paper.objects.get(submission=sub).file
    # The flash and the quota box say the same thing, and it is what the quota does.
    assert "still counts for today" not in page and "do not count" not in page
    assert page.count(QUOTA_RULE) >= 1
    quota = checklist_quota(team=m.team)
    assert (quota.used_today, quota.used_total) == (1, 0)
    # Listed as Withdrawn, not Failed.
    mine = client.get(reverse("checklist:mine")).content.decode()
    row = re.search(rf"#{sub.pk}.*?</tr>", mine, re.S)
    assert row is not None and "Withdrawn" in row.group(0) and "Failed" not in row.group(0)
    assert ChecklistSubmission.objects.counting_towards_quota().count() == 0
