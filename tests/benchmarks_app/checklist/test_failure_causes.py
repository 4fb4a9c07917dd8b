# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""A checklist run whose judge refused an answer says why, on its pages and in the API."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings
from django.urls import reverse

from benchmarks_app.models import AssessmentStatus, ChecklistAssessment, RunStatus
from benchmarks_app.selectors.runs import run_failure_causes
from benchmarks_app.services.checklist import checklist_submission_assess
from benchmarks_app.services.runs import run_resume
from tests.factories.checklist import MembershipFactory, PaperFactory, add_answers
from tests.scoring.judges.fake_openai import FakeOpenAI, completion, error_body

pytestmark = pytest.mark.django_db


def test_a_refused_answer_is_explained_until_a_resume_judges_it(
    client, django_capture_on_commit_callbacks
) -> None:
    m = MembershipFactory()
    paper = PaperFactory(submission__team=m.team)
    add_answers(paper, {n: "No" for n in range(1, 16)})
    state = {"down": True}

    def handler(body: dict):  # type: ignore[no-untyped-def]
        if state["down"] and "<question>\n3." in body["messages"][1]["content"]:
            return 400, error_body("model 'm1' not found")  # refused: not worth retrying
        return completion(json.dumps({"correct": True, "feedback": "ok"}))

    with (
        FakeOpenAI(handler) as server,
        override_settings(OPENAI_BASE_URL=server.base_url, JUDGE_MAX_RETRIES=0),
    ):
        with django_capture_on_commit_callbacks(execute=True):
            run = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
        run.refresh_from_db()
        assert run.status == RunStatus.FAILED and run.failed_items == 1

        causes = run_failure_causes(run=run)
        assert [(c.kind, c.count, c.resumable) for c in causes] == [("rejected", 1, False)]
        assert "HTTP 400 model 'm1' not found" in causes[0].message
        # The run's message names what to check before resuming.
        assert run.error.startswith("1 item(s) could not be judged. Causes: 1 x BadRequestError")
        assert "check OPENAI_BASE_URL, OPENAI_API_KEY and JUDGE_MODEL" in run.error

        client.force_login(m.user)
        data = client.get(f"/api/runs/{run.pk}/").json()
        assert [c["kind"] for c in data["failure_causes"]] == ["rejected"]
        assert data["failure_causes"][0]["count"] == 1 and data["failed_items"] == 1
        page = client.get(
            reverse("checklist:submission-detail", args=[paper.submission_id])
        ).content.decode()
        assert "Why 1 item could not be judged" in page and 'data-kind="rejected"' in page

        state["down"] = False
        with django_capture_on_commit_callbacks(execute=True):
            run_resume(run=run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    failed = ChecklistAssessment.objects.filter(run=run, status=AssessmentStatus.JUDGE_FAILED)
    assert failed.count() == 1  # still on record, superseded by the verdict of the resume
    assert run_failure_causes(run=run) == []
    assert client.get(f"/api/runs/{run.pk}/").json()["failure_causes"] == []
