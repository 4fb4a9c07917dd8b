# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""The judge-call ledger keeps the prompt and the raw response (issue 13), for staff only.

Prompts are stored once per distinct text (the votes of a question, its re-asks and later runs
share one row); each ledger row keeps what the server returned before it was parsed.
"""

from __future__ import annotations

import html
import json
import threading
from typing import Any

import pytest
from django.test import override_settings
from django.urls import reverse

from benchmarks_app.models import JudgeCall, JudgePrompt, Repo, RunStatus, Scanner
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.checklist import checklist_submission_assess
from benchmarks_app.services.judging import DbJudgeCache, ledger_recorder
from benchmarks_app.services.runs import run_wait
from scoring.judges.consensus import VoteFailed
from scoring.judges.records import RAW_RESPONSE_LIMIT, Prompt
from tests.benchmarks_app.audit.conftest import fake_verdict
from tests.benchmarks_app.judging.helpers import QUESTION, ask
from tests.factories.audit import repo_with_scan
from tests.factories.checklist import MembershipFactory, PaperFactory, add_answers
from tests.factories.common import RunFactory, StaffFactory, UserFactory
from tests.scoring.judges.fake_openai import FakeOpenAI, completion, error_body

pytestmark = pytest.mark.django_db
SECRET = "SECRET-TRUTH-DESCRIPTION"
CORRECTION = "Note: a previous answer to this question was invalid"


class Answering:
    """Wraps a handler: keeps every answer's text, and answers the first question about the
    reentrancy truth with prose (an invalid verdict that is asked again)."""

    def __init__(self, handler: Any, *, garble_first: str | None = None) -> None:
        self.handler = handler
        self.garble_first = garble_first
        self.contents: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Any:
        user = body["messages"][-1]["content"]
        with self.lock:
            if self.garble_first and self.garble_first in user and CORRECTION not in user:
                self.garble_first = None
                answer = completion("I believe it is a match, but here is no JSON.")
            else:
                answer = self.handler(body)
            self.contents.append(answer["choices"][0]["message"]["content"])
        return answer


def _asked(server: FakeOpenAI) -> set[tuple[str, str]]:
    """The distinct questions sent (a re-ask's correction note is not part of the question)."""
    return {
        (r["messages"][0]["content"], r["messages"][1]["content"].split("\n\n" + CORRECTION)[0])
        for r in server.requests
        if len(r.get("messages", [])) == 2 and "Reply with the JSON object" not in str(r)
    }


def _stored() -> set[tuple[str, str]]:
    return set(JudgePrompt.objects.values_list("system", "user"))


@pytest.fixture
def judge_settings(settings: Any) -> Any:
    settings.OPENAI_API_KEY = "test-key"
    settings.JUDGE_MAX_RETRIES = 1
    settings.JUDGE_BACKOFF_BASE_S = 0.001
    settings.JUDGE_BACKOFF_MAX_S = 0.002
    settings.JUDGE_MODEL = "fake-model"
    settings.JUDGE_MODELS = []
    return settings


@pytest.fixture
def audit_runs(judge_settings: Any) -> dict[str, Any]:
    """Two runs of an openai judge on a hidden repo: the second with another model."""
    repo, _ = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness"],
        findings=["Unrelated gas issue", "Reentrancy when withdrawing"],
    )
    repo.truth_findings.update(description=f"{SECRET}: drain the vault")
    Repo.objects.filter(pk=repo.pk).update(is_public=False)
    scanner = Scanner.objects.get(name="tool")
    answering = Answering(fake_verdict, garble_first="Title: Reentrancy in withdraw")
    with FakeOpenAI(answering) as server:
        judge_settings.OPENAI_BASE_URL = server.base_url
        first = run_wait(run=audit_run_create(scanner=scanner, judge="openai"))
        asked_first = _asked(server)
        prompts_after_first = JudgePrompt.objects.count()
        second = run_wait(run=audit_run_create(scanner=scanner, judge="openai", model="other"))
    return {
        "first": first,
        "second": second,
        "server": server,
        "answering": answering,
        "asked_first": asked_first,
        "prompts_after_first": prompts_after_first,
    }


def test_an_audit_run_stores_each_prompt_once_and_every_raw_answer(
    audit_runs: dict[str, Any],
) -> None:
    first, second = audit_runs["first"], audit_runs["second"]
    assert first.status == second.status == RunStatus.SUCCEEDED
    # One row per distinct question, holding the hidden truth the judge was shown.
    assert audit_runs["prompts_after_first"] == len(audit_runs["asked_first"]) > 0
    assert _stored() == audit_runs["asked_first"]
    assert all(SECRET in user for _, user in _stored())
    # The second run asked the same questions of another model: no new prompt.
    assert JudgePrompt.objects.count() == audit_runs["prompts_after_first"]
    calls = JudgeCall.objects.filter(run__in=[first, second])
    assert {c.run_id for c in calls} == {first.pk, second.pk}
    keys = dict(JudgePrompt.objects.values_list("key", "user"))
    assert all(c.prompt_key in keys for c in calls)
    # Every attempt keeps what the server returned, the prose answer that was re-asked too.
    assert sorted(c.raw_response for c in calls) == sorted(audit_runs["answering"].contents)
    invalid = calls.get(status="invalid")
    assert invalid.raw_response == "I believe it is a match, but here is no JSON."
    retried = calls.get(run=first, prompt_hash=invalid.prompt_hash, attempt=2)
    assert retried.status == "ok" and json.loads(retried.raw_response)["is_match"] is True
    assert retried.prompt_key == invalid.prompt_key  # the re-ask is the same question


def test_public_pages_and_the_api_never_show_prompts_or_raw_answers(
    audit_runs: dict[str, Any], client: Any
) -> None:
    from rest_framework.test import APIClient

    run = audit_runs["first"]
    prose = "here is no JSON"
    api = APIClient()
    api.force_authenticate(UserFactory.create())
    items = api.get(f"/api/runs/{run.pk}/items/")
    assert items.status_code == 200 and len(items.json()["results"]) == 2
    client.force_login(UserFactory.create())
    pages = [items.content.decode()]
    for url in (f"/api/runs/{run.pk}/", f"/runs/{run.pk}/", f"/audit/runs/{run.pk}/"):
        response = client.get(url)
        assert response.status_code == 200, url
        pages.append(response.content.decode())
    for page in pages:
        assert SECRET not in page and prose not in page


def test_checklist_votes_share_one_prompt_and_later_runs_add_none(
    judge_settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    judge_settings.CHECKLIST_VOTES = "two"
    m = MembershipFactory()
    paper = PaperFactory(submission__team=m.team, extracted_text="1 Introduction\nPAPER-BODY\n")
    add_answers(paper, {1: "Yes", 9: "Yes"})
    answering = Answering(
        lambda body: completion(json.dumps({"correct": True, "feedback": "fine"}))
    )
    staff = StaffFactory.create()
    with (
        FakeOpenAI(answering) as server,
        override_settings(OPENAI_BASE_URL=server.base_url),
        django_capture_on_commit_callbacks(execute=True),
    ):
        first = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
        again = checklist_submission_assess(
            submission=paper.submission, user=staff, judge="openai:m1"
        )
        other = checklist_submission_assess(
            submission=paper.submission, user=staff, judge="openai:m2"
        )
    asked = _asked(server)
    # Two questions, two votes each, asked of two models: two prompts in all.
    assert len(asked) == 2 and _stored() == asked
    assert all("PAPER-BODY" in user for _, user in _stored())
    fresh = JudgeCall.objects.filter(run=first)
    assert fresh.count() == 4 and len({c.prompt_hash for c in fresh}) == 4
    assert len({c.prompt_key for c in fresh}) == 2
    cached = JudgeCall.objects.filter(run=again)
    assert {c.status for c in cached} == {"cached"} and cached.count() == 4
    assert all(
        c.raw_response == "" and c.prompt_key in {f.prompt_key for f in fresh} for c in cached
    )
    asked_again = JudgeCall.objects.filter(run__in=[first, other]).exclude(status="cached")
    assert sorted(c.raw_response for c in asked_again) == sorted(answering.contents)


def test_error_bodies_and_cut_answers_are_kept_capped(judge_settings: Any) -> None:
    run = RunFactory.create()
    long_answer = '{"label": "' + "x" * (RAW_RESPONSE_LIMIT + 500)

    def handler(body: dict[str, Any]) -> Any:
        user = body["messages"][1]["content"]
        if user.startswith("refused"):
            return 400, error_body("REFUSAL-BODY: the model does not exist")
        return completion(long_answer, finish_reason="length")

    with FakeOpenAI(handler) as server:
        recorder = ledger_recorder(run, holder="p:1")
        with pytest.raises(VoteFailed):
            ask(server, cache=DbJudgeCache(), record=recorder, user="refused question")
        with pytest.raises(VoteFailed):
            ask(server, cache=DbJudgeCache(), record=recorder, user="long question")
    error = JudgeCall.objects.get(status="error")
    assert json.loads(error.raw_response)["error"]["message"].startswith("REFUSAL-BODY")
    cut = JudgeCall.objects.filter(status="truncated")
    assert cut.count() == 2
    assert all(c.raw_response == long_answer[:RAW_RESPONSE_LIMIT] for c in cut)
    assert _stored() == {
        (QUESTION["system"], "refused question"),
        (QUESTION["system"], "long question"),
    }


def _row(prompt: Prompt, **fields: Any) -> JudgeCall:
    JudgePrompt.objects.create(key=prompt.key, system=prompt.system, user=prompt.user)
    base = {"judge": "j", "model": "m", "prompt_hash": "h" * 64, "status": "ok"}
    return JudgeCall.objects.create(prompt_key=prompt.key, **{**base, **fields})


def test_the_admin_detail_shows_prompt_and_raw_response_to_staff_only(
    admin_client: Any, client: Any
) -> None:
    prompt = Prompt("SYSTEM <rules>", "USER-START " + "p" * 30_000 + " USER-END")
    call = _row(prompt, raw_response='{"verdict": "RAW <answer>"}', attempt=2)
    url = reverse("admin:benchmarks_app_judgecall_change", args=[call.pk])
    page = html.unescape(admin_client.get(url).content.decode())
    assert "SYSTEM <rules>" in page and "USER-START" in page
    assert "USER-END" not in page  # a paper-sized prompt is cut, and says so
    assert f"cut at 20,000 of {len(prompt.user):,} characters" in page
    assert '{"verdict": "RAW <answer>"}' in page
    assert "followed by a short correction note" in page
    assert "Not stored" not in page

    client.force_login(UserFactory.create(is_staff=False))
    response = client.get(url)
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert "USER-START" not in response.content.decode()


def test_a_cache_hit_says_why_it_has_no_raw_response(admin_client: Any) -> None:
    call = _row(Prompt("s", "u"), status="cached")
    url = reverse("admin:benchmarks_app_judgecall_change", args=[call.pk])
    page = admin_client.get(url).content.decode()
    assert "a cache hit asks no server" in page and "Not stored" not in page
