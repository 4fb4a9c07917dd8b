# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from benchmarks_app.models import (
    AssessmentStatus,
    ChecklistAssessment,
    JudgeCall,
    RunStatus,
    SubmissionStatus,
)
from benchmarks_app.services.checklist import (
    checklist_submission_assess,
    checklist_submission_create,
)
from benchmarks_app.services.runs import run_resume
from scoring.checklist.scores import PaperAssessment, checklist_scores
from tests.factories.checklist import (
    MembershipFactory,
    PaperFactory,
    add_answers,
)
from tests.scoring.judges.fake_openai import FakeOpenAI, completion, error_body

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _two_votes(settings: Any) -> None:
    # These tests count the calls of the majority policy (two votes, a third on disagreement).
    settings.CHECKLIST_VOTES = "two"


def _recompute(run) -> tuple[float, ...]:  # type: ignore[no-untyped-def]
    papers: dict[str, tuple[dict, dict]] = {}
    for a in ChecklistAssessment.objects.filter(run=run).select_related(
        "answer__paper", "answer__question"
    ):
        answers, correct = papers.setdefault(a.answer.paper.kind, ({}, {}))
        answers[a.answer.question.number] = a.answer.answer
        correct[a.answer.question.number] = a.correct
    s = checklist_scores(*(PaperAssessment(*papers[k]) for k in ("G", "A", "T")))
    return (s.c_g, s.c_a, s.c_t, s.r, s.s)


def test_triplet_is_assessed_through_the_queue(
    demo_triplet, django_capture_on_commit_callbacks
) -> None:
    m = MembershipFactory()
    with django_capture_on_commit_callbacks(execute=True):
        sub = checklist_submission_create(team=m.team, user=m.user, files=demo_triplet)
        assert sub.status == SubmissionStatus.EXTRACTED and not sub.runs.exists()
        run = checklist_submission_assess(submission=sub, user=m.user)
    run.refresh_from_db()
    sub.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.is_complete
    assert (run.progress_done, run.progress_total) == (45, 45)
    assert sub.status == SubmissionStatus.SCORED
    score = sub.scores.get()
    assert (score.c_g, score.c_a, score.c_t, score.r, score.s) == _recompute(run)
    # The planted errors are caught: A's Yes answers citing missing sections get c = 0.
    a_q7 = ChecklistAssessment.objects.get(
        run=run, answer__paper__kind="A", answer__question__number=7
    )
    assert a_q7.correct == 0 and "Section 4.3" in a_q7.feedback
    assert 0 < score.s < 1


def test_todo_answers_get_zero_without_a_judge_call(django_capture_on_commit_callbacks) -> None:
    m = MembershipFactory()
    paper = PaperFactory(submission__team=m.team, extracted_text="1 Introduction\ntext")
    add_answers(paper, {1: "Yes", 9: "Yes"})  # 13 TODO answers
    calls: list[dict] = []

    def handler(body: dict) -> dict:
        calls.append(body)
        return completion(json.dumps({"correct": True, "feedback": "fine"}))

    with (
        FakeOpenAI(handler) as server,
        override_settings(OPENAI_BASE_URL=server.base_url),
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    # Two questions judged, two agreeing votes each; TODOs never reach the judge.
    assert len(calls) == 4
    rows = ChecklistAssessment.objects.filter(run=run)
    assert rows.filter(status=AssessmentStatus.SKIPPED_TODO, correct=0).count() == 13
    assert JudgeCall.objects.filter(run=run).count() == 4
    score = paper.submission.scores.get()
    assert score.c_g == 2 / 15
    assert (score.c_a, score.c_t, score.r, score.s) == (0.0, 0.0, 1.0, 0.0)


def test_judge_failures_are_recorded_not_zero_and_resume_redoes_only_them(
    django_capture_on_commit_callbacks,
) -> None:
    m = MembershipFactory()
    paper = PaperFactory(submission__team=m.team)
    add_answers(paper, {n: "No" for n in range(1, 16)})
    state = {"down": True, "calls": 0}

    def handler(body: dict):  # type: ignore[no-untyped-def]
        state["calls"] += 1
        user = body["messages"][1]["content"]
        if state["down"] and "<question>\n3." in user:
            return 400, error_body("bad request")  # not transient: the vote fails at once
        return completion(json.dumps({"correct": True, "feedback": "ok"}))

    with (
        FakeOpenAI(handler) as server,
        override_settings(OPENAI_BASE_URL=server.base_url, JUDGE_MAX_RETRIES=0),
    ):
        with django_capture_on_commit_callbacks(execute=True):
            run = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
        run.refresh_from_db()
        assert run.status == RunStatus.FAILED and run.failed_items == 1
        failed = ChecklistAssessment.objects.get(run=run, status=AssessmentStatus.JUDGE_FAILED)
        assert failed.correct is None and failed.answer.question.number == 3
        assert not paper.submission.scores.exists()  # never scored with a missing verdict
        paper.submission.refresh_from_db()
        assert paper.submission.status == SubmissionStatus.FAILED
        calls_before = state["calls"]
        state["down"] = False
        with django_capture_on_commit_callbacks(execute=True):
            run_resume(run=run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert state["calls"] - calls_before == 2  # only question 3 was asked again
    ok = ChecklistAssessment.objects.filter(run=run).exclude(status=AssessmentStatus.JUDGE_FAILED)
    assert ok.count() == 15
    assert ChecklistAssessment.objects.filter(run=run).count() == 16  # the failure stays on record
    assert paper.submission.scores.get().c_g == 1.0
