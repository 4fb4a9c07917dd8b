# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Issue 35: a submission refused at parsing (a results file or body that is not valid CSV or
JSON, or over a limit) costs its sender part of an hourly allowance, so that one account
cannot keep the site parsing bad files in a loop. Past UPLOAD_REFUSALS_PER_HOUR the user's
next submission is answered 429 with Retry-After before it is parsed, on the API and the web
forms alike; accepted submissions and other users are not affected."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app import upload_reads
from benchmarks_app.models import EvaluationRun, ResponseSubmission
from benchmarks_app.services.probes import probe_suite_import
from tests.benchmarks_app.probes.conftest import GOOD, PROBES, jsonl
from tests.factories.audit import RepoFactory, TruthFindingFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_refusals(settings: Any) -> None:
    settings.UPLOAD_REFUSALS_PER_HOUR = 2


def _api(username: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user(username, password="pw"))
    return client


def _post_responses(api: APIClient, model: str, data: bytes, name: str = "r.jsonl") -> Any:
    return api.post(
        reverse("api:probes-submit"),
        {"suite": "mini", "model": model, "file": SimpleUploadedFile(name, data)},
        format="multipart",
    )


def _good_responses() -> bytes:
    return jsonl([{"probe_id": pid, "output": text} for pid, text in GOOD.items()]).encode()


@pytest.fixture
def suite(db: Any) -> None:
    probe_suite_import(name="mini", text=jsonl(PROBES), fmt="jsonl")


def _audit_url() -> str:
    repo = RepoFactory(project_id="code4rena_vault_2025_01", name="Vault")
    TruthFindingFactory(repo=repo, finding_id="H-01", order=0, title="Reentrancy in withdraw")
    return reverse("api:audit-submit", args=[repo.project_id]) + "?scanner=mytool&judge=offline"


def test_refused_responses_files_spend_the_allowance_then_even_a_good_file_waits(
    two_refusals: None, suite: None
) -> None:
    api = _api("looper")
    refused = [_post_responses(api, "m", b"{not json\n").status_code for _ in range(2)]
    assert refused == [400, 400]
    spent = _post_responses(api, "m", _good_responses())
    assert spent.status_code == 429
    body = spent.json()
    assert body["code"] == "throttled"
    assert 1 <= int(spent["Retry-After"]) == body["retry_after_s"] <= 3600
    assert "2 submissions refused this hour" in body["detail"]
    assert "this one was not parsed" in body["detail"]
    assert not ResponseSubmission.objects.exists()
    # Another account's allowance is its own.
    other = _post_responses(_api("careful"), "m", _good_responses())
    assert other.status_code == 201, other.content[:300]


def test_accepted_submissions_cost_nothing(two_refusals: None, suite: None) -> None:
    api = _api("participant")
    codes = [_post_responses(api, f"m{i}", _good_responses()).status_code for i in range(4)]
    assert codes == [201, 201, 201, 201]
    assert _post_responses(api, "m-bad", b"{not json\n").status_code == 400
    assert _post_responses(api, "m5", _good_responses()).status_code == 201


def test_a_json_body_the_parser_refuses_counts_like_a_bad_file(two_refusals: None) -> None:
    url = _audit_url()
    api = _api("looper")
    # Not JSON at all (DRF's parser raises), then JSON the findings check refuses.
    assert api.post(url, "{not json", content_type="application/json").status_code == 400
    no_findings = api.post(url, json.dumps({"nothing": 1}), content_type="application/json")
    assert no_findings.status_code == 400
    good = json.dumps({"findings": [{"title": "Reentrancy in withdraw", "severity": "high"}]})
    spent = api.post(url, good, content_type="application/json")
    assert spent.status_code == 429 and spent.json()["code"] == "throttled"
    assert not EvaluationRun.objects.exists()


def test_the_web_form_counts_refusals_and_answers_429_past_them(
    two_refusals: None, suite: None, client: Any
) -> None:
    user = get_user_model().objects.create_user("web-looper", password="pw")
    client.force_login(user)

    def post(data: bytes) -> Any:
        upload = SimpleUploadedFile("r.jsonl", data)
        return client.post("/probes/submit/", {"suite": "mini", "model": "m", "file": upload})

    assert [post(b"{not json\n").status_code for _ in range(2)] == [400, 400]
    spent = post(_good_responses())
    assert spent.status_code == 429
    assert int(spent["Retry-After"]) >= 1
    assert b"submissions refused this hour" in spent.content
    assert not ResponseSubmission.objects.exists()
    # Showing the form reads nothing and is not refused.
    assert client.get("/probes/submit/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_refusals_are_counted_across_two_processes_sharing_the_cache(tmp_path: Any) -> None:
    from tests.benchmarks_app.limits.processes import Worker, key_prefix, shared_database_url

    probe_suite_import(name="mini", text=jsonl(PROBES), fmt="jsonl")
    get_user_model().objects.create_user("looper", password="pw")
    database_url, prefix = shared_database_url(tmp_path), key_prefix()
    limit = {"UPLOAD_REFUSALS_PER_HOUR": "3", "MEDIA_ROOT": str(tmp_path)}
    workers = [
        Worker(database_url, prefix, "refused", "looper", "mini", "3", **limit) for _ in "ab"
    ]
    try:
        for worker in workers:
            worker.ready()
        first, second = (worker.go()["codes"] for worker in workers)
    finally:
        for worker in workers:
            worker.stop()
    # A count per process would have refused 3 bad files in each; the shared one lets 3 be
    # read in all, then answers 429 before reading.
    assert first == [400, 400, 400]
    assert second == [429, 429, 429]


def test_a_spent_account_s_file_is_read_raw_and_thrown_away_not_parsed(
    two_refusals: None, suite: None, monkeypatch: Any
) -> None:
    api = _api("looper")
    for _ in range(2):
        assert _post_responses(api, "m", b"{not json\n").status_code == 400
    parsed: list[int] = []
    real = upload_reads.upload_received_size

    def counted(request: Any) -> int:
        parsed.append(1)
        return real(request)

    monkeypatch.setattr(upload_reads, "upload_received_size", counted)
    big = b"x" * (3 * 1024 * 1024)
    spent = _post_responses(api, "m", big, name="bomb.jsonl")
    assert spent.status_code == 429
    assert parsed == []  # refused before its multipart form was parsed


class _SlowStream(io.BytesIO):
    def read(self, size: int | None = -1) -> bytes:
        time.sleep(0.05)
        return super().read(size)


def _raw_request(body: io.BytesIO, length: int) -> Any:
    return RequestFactory().post(
        "/x",
        data=b"",
        content_type="application/octet-stream",
        CONTENT_LENGTH=str(length),
        **{"wsgi.input": body},
    )


def test_draining_reads_a_body_to_its_end_within_its_bounds() -> None:
    data = b"y" * (upload_reads.DRAIN_MAX_BYTES - 17)
    stream = io.BytesIO(data)
    assert upload_reads.request_body_drain(_raw_request(stream, len(data))) is True
    assert stream.tell() == len(data)
    # Over the byte bound: left unread (its connection is reset, as a server does).
    stream = io.BytesIO(data)
    assert upload_reads.request_body_drain(_raw_request(stream, len(data)), max_bytes=1024) is False
    assert stream.tell() == 0
    over = b"z" * (upload_reads.DRAIN_MAX_BYTES + 1)
    stream = io.BytesIO(over)
    assert upload_reads.request_body_drain(_raw_request(stream, len(over))) is False
    assert stream.tell() == 0
    # A sender slower than the time bound is given up on within about that bound.
    slow = _SlowStream(data)
    started = time.monotonic()
    assert upload_reads.request_body_drain(_raw_request(slow, len(data)), max_s=0.1) is False
    assert time.monotonic() - started < 1.0
    assert 0 < slow.tell() < len(data)
    # A body shorter than its stated length: not drained.
    assert upload_reads.request_body_drain(_raw_request(io.BytesIO(b"abc"), 10)) is False


def test_the_ten_minute_allowance_stops_a_burst_before_the_hour_s(
    settings: Any, suite: None
) -> None:
    """The hour's refusals are not for one burst: past UPLOAD_REFUSALS_PER_10_MIN the next
    submission waits, and the answer names the window that refused it."""
    settings.UPLOAD_REFUSALS_PER_HOUR = 20
    settings.UPLOAD_REFUSALS_PER_10_MIN = 3
    api = _api("burst")
    refused = [_post_responses(api, "m", b"{not json\n").status_code for _ in range(3)]
    assert refused == [400, 400, 400]
    spent = _post_responses(api, "m", _good_responses())
    assert spent.status_code == 429
    assert "3 submissions refused in the last 10 minutes" in spent.json()["detail"]
    # The wait is the short window's, not the hour's.
    assert 1 <= int(spent["Retry-After"]) <= 600
    assert not ResponseSubmission.objects.exists()
