# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from benchmarks_app.models import ChecklistSubmission, SubmissionStatus
from benchmarks_app.selectors.checklist import checklist_quota
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    PaperUpload,
    QuotaExceeded,
    checklist_submission_create,
    checklist_submission_discard,
)
from tests.factories.checklist import ChallengeFactory, MembershipFactory, TeamFactory


def _submit(m, genuine_tex) -> ChecklistSubmission:  # type: ignore[no-untyped-def]
    return checklist_submission_create(team=m.team, user=m.user, files={"G": genuine_tex})


@pytest.mark.django_db
def test_daily_limit_then_failed_submissions_do_not_count(genuine_tex) -> None:
    m = MembershipFactory(team__challenge__daily_limit=2, team__challenge__total_limit=10)
    first = _submit(m, genuine_tex)
    # A refused file (extraction error) stores nothing and costs nothing.
    with pytest.raises(ChecklistSubmissionError, match="genuine paper"):
        checklist_submission_create(
            team=m.team, user=m.user, files={"G": PaperUpload("bad.tex", b"no checklist")}
        )
    _submit(m, genuine_tex)
    with pytest.raises(QuotaExceeded, match="used its 2 submissions for today") as info:
        _submit(m, genuine_tex)
    assert info.value.quota.remaining == 0
    assert ChecklistSubmission.objects.filter(team=m.team).count() == 2
    # A withdrawal frees its slot of the total, not today's (submit-then-withdraw would
    # otherwise allow any number of uploads a day).
    checklist_submission_discard(submission=first)
    quota = checklist_quota(team=m.team)
    assert (quota.used_today, quota.used_total, quota.remaining_today) == (2, 1, 0)
    with pytest.raises(QuotaExceeded):
        _submit(m, genuine_tex)
    # Yesterday's submissions count towards the total only.
    ChecklistSubmission.objects.filter(team=m.team).update(
        created_at=timezone.now() - timedelta(days=1)
    )
    _submit(m, genuine_tex)
    quota = checklist_quota(team=m.team)
    assert (quota.used_today, quota.used_total, quota.remaining_total) == (1, 2, 8)


@pytest.mark.django_db
def test_total_limit_and_settings_fallback(genuine_tex, settings) -> None:
    settings.CHECKLIST_DAILY_LIMIT = 9
    settings.CHECKLIST_TOTAL_LIMIT = 1
    challenge = ChallengeFactory(daily_limit=None, total_limit=None)
    m = MembershipFactory(team=TeamFactory(challenge=challenge))
    assert (checklist_quota(team=m.team).daily_limit, checklist_quota(team=m.team).total_limit) == (
        9,
        1,
    )
    _submit(m, genuine_tex)
    with pytest.raises(QuotaExceeded, match="used all 1 submissions"):
        _submit(m, genuine_tex)


@pytest.mark.django_db
def test_failed_without_a_run_frees_the_total_slot_only(genuine_tex) -> None:
    m = MembershipFactory(team__challenge__daily_limit=1, team__challenge__total_limit=5)
    sub = _submit(m, genuine_tex)
    ChecklistSubmission.objects.filter(pk=sub.pk).update(status=SubmissionStatus.FAILED)
    quota = checklist_quota(team=m.team)
    assert (quota.used_today, quota.used_total, quota.remaining_total) == (1, 0, 5)
    assert quota.remaining == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_cannot_exceed_the_quota(genuine_tex, settings) -> None:
    if connection.vendor == "sqlite":
        print("skipped on SQLite: no row locks (select_for_update is a no-op)")
        pytest.skip("SQLite has no row-level locks; this test runs on PostgreSQL")
    # The quota under concurrency, not the site's reader cap (tested in limits/): every
    # submission here may be read at once.
    settings.PAPER_READERS_MAX = 64
    m = MembershipFactory(team__challenge__daily_limit=3, team__challenge__total_limit=100)
    threads_n = 8
    barrier = threading.Barrier(threads_n)
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        try:
            barrier.wait()
            _submit(m, genuine_tex)
            result = "ok"
        except QuotaExceeded:
            result = "quota"
        except Exception as exc:  # pragma: no cover - reported below
            result = f"error: {exc!r}"
        finally:
            connections.close_all()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=worker) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["ok"] * 3 + ["quota"] * 5, outcomes
    assert ChecklistSubmission.objects.filter(team=m.team).count() == 3
