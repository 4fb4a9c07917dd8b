"""The checklist judge over a keep-alive server, as real servers and the OpenAI API are.

Regression test of issue 17: the run built one ``AsyncOpenAI`` client, then judged each batch
of ``JUDGE_BATCH_SIZE`` answers in a new event loop. The client's pooled connections belonged
to the first loop, so from batch 2 on every pooled connection failed with "Event loop is
closed" and those answers became judge_failed. A server that closes each connection (HTTP/1.0,
as the other fakes do) hides the bug; this one keeps them open.
"""

# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from benchmarks_app.models import AssessmentStatus, ChecklistAssessment, JudgeCall, RunStatus
from benchmarks_app.services.checklist import checklist_submission_assess
from tests.factories.checklist import MembershipFactory, PaperFactory, add_answers
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _two_votes(settings: Any) -> None:
    # These tests count the calls of the majority policy (two votes, a third on disagreement).
    settings.CHECKLIST_VOTES = "two"


def _verdict(body: dict[str, Any]) -> dict[str, Any]:
    return completion(json.dumps({"correct": True, "feedback": "The paper supports it."}))


def test_every_batch_is_judged_over_kept_alive_connections(
    django_capture_on_commit_callbacks,
) -> None:
    m = MembershipFactory()
    paper = PaperFactory(submission__team=m.team)
    add_answers(paper, {n: "Yes" for n in range(1, 16)})
    with (
        FakeOpenAI(_verdict, keep_alive=True) as server,
        override_settings(
            OPENAI_BASE_URL=server.base_url,
            JUDGE_BATCH_SIZE=4,  # 15 answers: four batches
            JUDGE_CONCURRENCY=4,
            JUDGE_MAX_RETRIES=0,
        ),
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
    run.refresh_from_db()
    errors = list(JudgeCall.objects.filter(run=run, status="error").values_list("error", flat=True))
    assert errors == []
    assert run.status == RunStatus.SUCCEEDED, run.error
    ok = ChecklistAssessment.objects.filter(run=run, status=AssessmentStatus.OK)
    assert ok.count() == 15
    # Two agreeing votes per answer, all over connections the client kept.
    assert len(server.requests) == 30
    assert server.connections <= 4
    assert paper.submission.scores.get().c_g == 1.0


def test_the_probe_runs_in_the_same_loop_and_is_recorded_on_the_run(
    django_capture_on_commit_callbacks,
) -> None:
    m = MembershipFactory()
    paper = PaperFactory(submission__team=m.team)
    add_answers(paper, {n: "Yes" for n in range(1, 16)})

    def handler(body: dict[str, Any]) -> Any:
        if body.get("response_format", {}).get("type") == "json_schema":
            return 400, {"error": {"message": "response_format json_schema is not supported"}}
        return _verdict(body)

    with (
        FakeOpenAI(handler, keep_alive=True) as server,
        override_settings(
            OPENAI_BASE_URL=server.base_url,
            JUDGE_BATCH_SIZE=5,
            JUDGE_PROBE=True,
            JUDGE_MAX_ANSWER_TOKENS=300,
            JUDGE_SEED=7,
        ),
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    request = run.judge_config["request"]
    assert request["response_format"] == "json_object"
    assert request["max_answer_tokens"] == 300
    assert request["seed"] == "7 + vote number"
    judged = [r for r in server.requests if r.get("max_completion_tokens") == 300]
    assert len(judged) == 30
    assert {r["response_format"]["type"] for r in judged} == {"json_object"}
    assert {r["seed"] for r in judged} == {8, 9}
