"""Issue 35: a token refused for its rate is refused again at the top of the stack, without the
database, until its wait is over; quota refusals and other paths go the usual way."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app import refused_senders
from benchmarks_app.models import EvaluationRun
from tests.factories.audit import RepoFactory, TruthFindingFactory
from tests.factories.common import UserFactory, token_for

pytestmark = pytest.mark.django_db


def _findings(n: int) -> dict[str, Any]:
    """A results body of its own (the same body again answers with the run it made)."""
    return {"findings": [{"title": f"Reentrancy in withdraw ({n})", "severity": "High"}]}


@pytest.fixture
def token_client(settings: Any) -> APIClient:
    rest = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {"anon": "100/min", "user": "3/min"}
    settings.REST_FRAMEWORK = rest
    settings.REFUSED_SENDER_DELAY_S = 0.0  # answered at once (the late answer is tested below)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(UserFactory())}")
    return client


def _audit_url() -> str:
    repo = RepoFactory(project_id="code4rena_vault_2025_01", name="Vault")
    TruthFindingFactory(repo=repo, title="Reentrancy in withdraw", severity="High")
    return reverse("api:audit-submit", args=[repo.project_id]) + "?scanner=mine&judge=offline"


def test_a_throttled_token_is_refused_before_the_view_until_its_wait_is_over(
    token_client: APIClient,
) -> None:
    url = _audit_url()
    answers = [token_client.post(url, _findings(n), format="json") for n in range(4)]
    assert [a.status_code for a in answers[:3]] == [202, 202, 202]
    throttled = answers[3]
    assert throttled.status_code == 429 and throttled.json()["code"] == "throttled"
    runs = EvaluationRun.objects.count()
    with CaptureQueriesContext(connection) as queries:
        again = token_client.post(url, _findings(5), format="json")
    # Answered by the middleware: no session, no token look-up, no view, no database.
    assert again.status_code == 429 and len(queries) == 0
    body = again.json()
    assert body["code"] == "throttled" and body["errors"][0]["code"] == "throttled"
    assert 1 <= body["retry_after_s"] <= 60 and again["Retry-After"] == str(body["retry_after_s"])
    assert body["retry_after_s"] <= throttled.json()["retry_after_s"]
    assert EvaluationRun.objects.count() == runs


def test_the_early_refusal_is_kept_to_the_token_and_the_path(token_client: APIClient) -> None:
    url = _audit_url()
    for n in range(4):
        token_client.post(url, _findings(n), format="json")
    # Another path of the same token goes through DRF (whose throttle still refuses it).
    with CaptureQueriesContext(connection) as queries:
        other = token_client.post(reverse("api:probes-submit"), {}, format="multipart")
    assert other.status_code == 429 and len(queries) > 0
    # Another token on the same path is served.
    fresh = APIClient()
    fresh.credentials(HTTP_AUTHORIZATION=f"Token {token_for(UserFactory())}")
    theirs = url.replace("scanner=mine", "scanner=theirs")
    assert fresh.post(theirs, _findings(9), format="json").status_code == 202
    # Reads are never answered early.
    with CaptureQueriesContext(connection) as queries:
        token_client.get(reverse("api:run-list"))
    assert len(queries) > 0


def test_a_quota_refusal_is_not_answered_early(settings: Any) -> None:
    settings.AUDIT_DAILY_SUBMISSIONS = 1
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(UserFactory())}")
    url = _audit_url()
    assert client.post(url, _findings(1), format="json").status_code == 202
    refused = client.post(url, _findings(2), format="json")
    assert refused.status_code == 429
    # The quota is checked again by the view each time (a maintainer may raise it).
    with CaptureQueriesContext(connection) as queries:
        again = client.post(url, _findings(3), format="json")
    assert again.status_code == 429 and len(queries) > 0
    settings.AUDIT_DAILY_SUBMISSIONS = 5
    assert client.post(url, _findings(4), format="json").status_code == 202


def test_a_sender_that_keeps_sending_is_answered_late_one_thread_at_a_time(
    token_client: APIClient, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.REFUSED_SENDER_DELAY_S = 0.7
    slept: list[float] = []
    monkeypatch.setattr(refused_senders.time, "sleep", slept.append)
    url = _audit_url()
    for n in range(4):
        token_client.post(url, _findings(n), format="json")
    assert slept == []  # the view's own refusal is answered at once
    assert token_client.post(url, _findings(5), format="json").status_code == 429
    assert slept == [0.7]
    # While this process's one late answer is being held, the next refusal goes at once:
    # a sender with many connections holds one thread per process at most.
    assert refused_senders._LATE_ANSWER.acquire(blocking=False)
    try:
        assert token_client.post(url, _findings(6), format="json").status_code == 429
    finally:
        refused_senders._LATE_ANSWER.release()
    assert slept == [0.7]
    settings.REFUSED_SENDER_DELAY_S = 0.0
    assert token_client.post(url, _findings(7), format="json").status_code == 429
    assert slept == [0.7]
