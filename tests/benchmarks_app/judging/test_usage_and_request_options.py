# mypy: disable-error-code="union-attr"
# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Each judge call keeps how it was asked (shown in the ledger admin), and a run shows what
its calls cost: calls, tokens (reasoning included), latency and, with prices set, money."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings
from django.urls import reverse

from benchmarks_app.models import JudgeCall, RunStatus
from benchmarks_app.services.checklist import checklist_submission_assess
from tests.factories.checklist import MembershipFactory, PaperFactory, add_answers
from tests.factories.common import StaffFactory
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

pytestmark = pytest.mark.django_db


def test_calls_keep_their_request_options_and_the_run_its_usage(
    client, settings, django_capture_on_commit_callbacks
) -> None:
    settings.JUDGE_PRICE_IN_PER_MTOK = 2.0
    settings.JUDGE_PRICE_OUT_PER_MTOK = 8.0
    m = MembershipFactory()
    paper = PaperFactory(submission__team=m.team)
    add_answers(paper, {n: "Yes" for n in range(1, 16)})

    def handler(body: dict):  # type: ignore[no-untyped-def]
        answer = completion(
            json.dumps({"correct": True, "feedback": "fine"}), tokens_in=1000, tokens_out=100
        )
        answer["usage"]["completion_tokens_details"] = {"reasoning_tokens": 40}
        # The paper is the prompt's shared prefix: the server read 600 tokens from its cache.
        answer["usage"]["prompt_tokens_details"] = {"cached_tokens": 600}
        return answer

    with (
        FakeOpenAI(handler) as server,
        override_settings(
            OPENAI_BASE_URL=server.base_url,
            JUDGE_TEMPERATURE=0.5,
            JUDGE_MAX_ANSWER_TOKENS=700,
        ),
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    calls = JudgeCall.objects.filter(run=run, status="ok")
    n = calls.count()
    assert n >= 15
    call = calls.first()
    assert call.request["model"] == "m1" and call.request["temperature"] == 0.5
    assert call.request["max_completion_tokens"] == 700
    assert call.request["response_format"] == "json_schema"
    assert call.request["seed"] == call.vote_number and call.tokens_reasoning == 40
    assert call.tokens_cached == 600

    staff = StaffFactory.create(is_superuser=True)
    client.force_login(staff)
    page = client.get(reverse("admin:benchmarks_app_judgecall_change", args=[call.pk]))
    text = page.content.decode()
    assert "Request options" in text and "<th>temperature</th><td>0.5</td>" in text
    assert "Tokens cached" in text

    usage = client.get(f"/api/runs/{run.pk}/").json()["judge_usage"]
    assert (usage["calls_new"], usage["calls_cached"]) == (n, 0)
    assert (usage["tokens_in"], usage["tokens_out"], usage["tokens_reasoning"]) == (
        1000 * n,
        100 * n,
        40 * n,
    )
    assert usage["latency_p50_ms"] <= usage["latency_p95_ms"]
    assert (usage["tokens_cached"], usage["cached_share"]) == (600 * n, 0.6)
    # Cached input at half the input price when no cached price is set.
    assert usage["cost_estimate"] == pytest.approx(n * (400 * 2.0 + 600 * 1.0 + 100 * 8.0) / 1e6)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f"{n} new, 0 cached" in page and f"{40 * n} reasoning" in page
    assert f"({600 * n} from the server's prompt cache)" in page
    settings.JUDGE_PRICE_CACHED_IN_PER_MTOK = 0.2
    usage = client.get(f"/api/runs/{run.pk}/").json()["judge_usage"]
    assert usage["cost_estimate"] == pytest.approx(n * (400 * 2.0 + 600 * 0.2 + 100 * 8.0) / 1e6)


@pytest.mark.parametrize(
    ("policy", "single", "calls_per_answer"),
    [("two", False, 2), ("adaptive", True, 1), ("adaptive", False, 1), ("single", False, 1)],
)
def test_checklist_single_vote_halves_the_calls(
    policy: str,
    single: bool,
    calls_per_answer: int,
    settings,
    django_capture_on_commit_callbacks,
    client,
) -> None:
    settings.CHECKLIST_VOTES = policy
    settings.CHECKLIST_SINGLE_VOTE = single
    m = MembershipFactory()
    paper = PaperFactory(submission__team=m.team)
    add_answers(paper, {n: "Yes" for n in range(1, 16)})
    verdict = completion(json.dumps({"correct": True, "feedback": "fine"}))
    with (
        FakeOpenAI(lambda _: verdict) as server,
        override_settings(OPENAI_BASE_URL=server.base_url),
        django_capture_on_commit_callbacks(execute=True),
    ):
        run = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    # Agreeing votes: the majority stops at two; a single vote is one call per answer, and so
    # is the adaptive policy's sure first vote.
    assert JudgeCall.objects.filter(run=run, status="ok").count() == 15 * calls_per_answer
    assert len(server.requests) == 15 * calls_per_answer
    # The run says how it voted and what that cost.
    client.force_login(m.user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    shown = "single" if single else policy
    assert f"{shown} (CHECKLIST_VOTES" in page
    again = 15 if calls_per_answer == 2 else 0
    assert f"{15 * calls_per_answer} votes for 15 answers, {again} asked again" in page
