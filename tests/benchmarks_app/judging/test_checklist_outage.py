# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""A checklist assessment whose judge is down pauses: the submission is not failed."""

from __future__ import annotations

import pytest
from django.test import override_settings

from benchmarks_app.models import ChecklistAssessment, JudgeCall, SubmissionStatus
from benchmarks_app.services.checklist.assessment import process_checklist
from scoring.judges.failures import JudgeUnavailable
from tests.factories.checklist import PaperFactory, add_answers
from tests.factories.common import ChecklistRunFactory
from tests.scoring.judges.fake_openai import FakeOpenAI, completion


@pytest.mark.django_db(transaction=True)
def test_judge_unavailable_leaves_the_submission_assessing_and_no_call_pending() -> None:
    paper = PaperFactory()
    add_answers(paper, {n: "Yes" for n in range(1, 16)})
    run = ChecklistRunFactory(checklist_submission=paper.submission, judge="openai:m1")
    with (
        FakeOpenAI(lambda _: completion('{"correct": true, "feedback": "fine"}')) as srv,
        override_settings(
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=srv.base_url,
            JUDGE_MAX_RETRIES=1,
            JUDGE_BACKOFF_BASE_S=0.01,
            JUDGE_BACKOFF_MAX_S=0.05,
            JUDGE_OUTAGE_PATIENCE_S=0.5,
        ),
    ):
        srv.fail_for(3600)
        with pytest.raises(JudgeUnavailable):
            process_checklist(run)
    paper.submission.refresh_from_db()
    assert paper.submission.status == SubmissionStatus.ASSESSING
    assert paper.submission.error == ""
    # Nothing was decided: no judge-failed assessment to redo, no vote counted as failed.
    assert not ChecklistAssessment.objects.filter(run=run).exists()
    # Every request is on the ledger and none was left pending: the failed ones as errors,
    # those cut short when the run paused as abandoned.
    statuses = set(JudgeCall.objects.filter(run=run).values_list("status", flat=True))
    assert "error" in statuses and statuses <= {"error", "abandoned"}
    assert JudgeCall.objects.filter(run=run).count() >= len(srv.requests) > 0
