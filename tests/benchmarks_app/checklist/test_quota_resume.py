# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""An accepted entry whose assessment failed keeps its quota slot, also after a resume.

"Failed submissions do not count" means files refused at upload or extraction (never
stored) and entries withdrawn before assessment; a judge failure is the platform's, not the
team's, and freeing the slot would let the team go over its limit once the run is resumed.
"""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from benchmarks_app.models import (
    Benchmark,
    ChecklistSubmission,
    RunStatus,
    SubmissionStatus,
)
from benchmarks_app.selectors.checklist import checklist_quota
from benchmarks_app.services.checklist import (
    PaperUpload,
    QuotaExceeded,
    checklist_submission_create,
    checklist_submission_discard,
)
from benchmarks_app.services.runs import run_create, run_resume
from tests.factories.checklist import MembershipFactory
from tests.scoring.judges.fake_openai import FakeOpenAI, completion, error_body

pytestmark = pytest.mark.django_db


def _submit(m, upload: PaperUpload, **kwargs) -> ChecklistSubmission:  # type: ignore[no-untyped-def]
    return checklist_submission_create(team=m.team, user=m.user, files={"G": upload}, **kwargs)


def test_judge_failure_keeps_the_slot_and_resume_stays_within_the_limit(
    genuine_tex, django_capture_on_commit_callbacks
) -> None:
    m = MembershipFactory(team__challenge__daily_limit=1, team__challenge__total_limit=10)
    state = {"down": True, "calls": 0}

    def handler(body: dict):  # type: ignore[no-untyped-def]
        state["calls"] += 1
        if state["down"]:
            return 400, error_body("bad request")  # not transient: the vote fails at once
        return completion(json.dumps({"correct": True, "feedback": "ok"}))

    with (
        FakeOpenAI(handler) as server,
        override_settings(OPENAI_BASE_URL=server.base_url, JUDGE_MAX_RETRIES=0),
    ):
        with django_capture_on_commit_callbacks(execute=True):
            sub = _submit(m, genuine_tex, assess=True, judge="openai:m1")
        run = sub.runs.get()
        run.refresh_from_db()
        sub.refresh_from_db()
        assert run.status == RunStatus.FAILED and run.failed_items > 0
        assert sub.status == SubmissionStatus.FAILED
        assert "still counts towards the team's quota" in sub.error
        quota = checklist_quota(team=m.team)
        assert (quota.used_today, quota.remaining) == (1, 0)

        # The failed assessment did not free the slot: a second entry is refused.
        with pytest.raises(QuotaExceeded, match="used its 1 submissions for today"):
            _submit(m, genuine_tex)
        assert ChecklistSubmission.objects.filter(team=m.team).count() == 1

        state["down"] = False
        with django_capture_on_commit_callbacks(execute=True):
            run_resume(run=run)
    run.refresh_from_db()
    sub.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert sub.status == SubmissionStatus.SCORED and sub.scores.exists()
    quota = checklist_quota(team=m.team)
    assert (quota.used_today, quota.used_total, quota.remaining) == (1, 1, 0)
    with pytest.raises(QuotaExceeded):
        _submit(m, genuine_tex)
    assert ChecklistSubmission.objects.filter(team=m.team).count() == 1


def test_a_crashed_assessment_keeps_the_slot(
    genuine_tex, django_capture_on_commit_callbacks
) -> None:
    m = MembershipFactory(team__challenge__daily_limit=1, team__challenge__total_limit=10)
    sub = _submit(m, genuine_tex)
    # A run whose processor raises (here: a judge the platform no longer knows); the
    # in-process queue re-raises what the worker would log.
    with (
        pytest.raises(ValueError, match="unknown checklist judge"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        run_create(benchmark=Benchmark.CHECKLIST, judge="retired-judge", checklist_submission=sub)
    run = sub.runs.get()
    run.refresh_from_db()
    sub.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert sub.status == SubmissionStatus.FAILED and sub.error.startswith("Assessment failed")
    assert checklist_quota(team=m.team).remaining == 0
    with pytest.raises(QuotaExceeded):
        _submit(m, genuine_tex)


def test_withdrawn_before_assessment_frees_the_total_slot_not_the_day(genuine_tex) -> None:
    m = MembershipFactory(team__challenge__daily_limit=1, team__challenge__total_limit=10)
    sub = _submit(m, genuine_tex)
    assert checklist_quota(team=m.team).remaining == 0
    checklist_submission_discard(submission=sub)
    sub.refresh_from_db()
    assert sub.status == SubmissionStatus.WITHDRAWN and not sub.runs.exists()
    quota = checklist_quota(team=m.team)
    assert (quota.used_today, quota.used_total, quota.remaining) == (1, 0, 0)
    with pytest.raises(QuotaExceeded, match="withdrawn submission still counts"):
        _submit(m, genuine_tex)
