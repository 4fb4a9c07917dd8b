# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Issue 35: reading participants' papers cannot crowd out the site. Past the site's reader
slots a read is refused at once (503, Retry-After) on the API and the web form; reads that
store nothing (previews, submissions refused at reading) are rated per user (429)."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import ChecklistSubmission
from benchmarks_app.services.reader_slots import (
    ReadersBusy,
    reader_slot_hold,
    reader_slots_held,
)
from tests.factories.checklist import MembershipFactory
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db
SAMPLE = Path(__file__).resolve().parents[3] / "benchmarks_app" / "sample_data" / "checklist"
EXTRACT = "/api/checklist/extract/"


def _tex(name: str = "genuine.tex") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, (SAMPLE / "demo" / name).read_bytes())


def _unreadable() -> SimpleUploadedFile:
    return SimpleUploadedFile("broken.pdf", b"%PDF-1.7\nnot really a PDF\n%%EOF\n")


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _hold_all(stack: ExitStack, count: int) -> None:
    for _ in range(count):
        stack.enter_context(reader_slot_hold())


def test_the_api_refuses_a_read_past_the_cap_with_503_and_retry_after(settings) -> None:
    settings.PAPER_READERS_MAX = 2
    client = _api(UserFactory())
    with ExitStack() as stack:
        _hold_all(stack, 2)
        with pytest.raises(ReadersBusy):
            reader_slot_hold().__enter__()
        busy = client.post(EXTRACT, {"file": _tex()}, format="multipart")
        assert busy.status_code == 503
        body = busy.json()
        assert body["code"] == "readers_busy"
        assert int(busy["Retry-After"]) == body["retry_after_s"] >= 1
        assert "reading 2 papers already" in body["detail"]
    assert reader_slots_held() == 0
    read = client.post(EXTRACT, {"file": _tex()}, format="multipart")
    assert read.status_code == 200 and read.json()["complete"] is True
    assert reader_slots_held() == 0  # a read gives its slot back


def test_the_submission_form_answers_503_past_the_cap_and_stores_nothing(settings) -> None:
    settings.PAPER_READERS_MAX = 1
    member = MembershipFactory()
    client = Client()
    client.force_login(member.user)
    with ExitStack() as stack:
        _hold_all(stack, 1)
        busy = client.post(reverse("checklist:submit"), {"genuine": _tex()})
    assert busy.status_code == 503
    assert int(busy["Retry-After"]) >= 1
    assert b"The site is busy" in busy.content and b"nothing was stored" in busy.content
    assert not ChecklistSubmission.objects.exists()
    # A refusal for load is not the participant's fault: it costs no preview allowance.
    assert client.post(reverse("checklist:submit"), {"genuine": _tex()}).status_code == 302


def test_a_slot_is_a_lease_renewed_while_reading_and_freed_when_its_holder_stops(
    settings,
) -> None:
    settings.PAPER_READERS_MAX = 1
    settings.PAPER_READER_LEASE_S = 3
    with reader_slot_hold() as heartbeat:
        for _ in range(16):  # 4 s: past the lease, renewed every second
            heartbeat()
            time.sleep(0.25)
        assert reader_slots_held() == 1
        with pytest.raises(ReadersBusy):
            reader_slot_hold().__enter__()
    # A holder that dies (never releases) is the one case the lease is for.
    abandoned = reader_slot_hold()
    abandoned.__enter__()
    assert reader_slots_held() == 1
    time.sleep(4)
    assert reader_slots_held() == 0
    with reader_slot_hold():
        assert reader_slots_held() == 1


def test_previews_are_rated_per_user(settings) -> None:
    settings.CHECKLIST_PAPER_CHECKS_PER_HOUR = 2
    user = UserFactory()
    client = _api(user)
    codes = [client.post(EXTRACT, {"file": _tex()}, format="multipart").status_code for _ in "abc"]
    assert codes == [200, 200, 429]
    refused = client.post(EXTRACT, {"file": _tex()}, format="multipart")
    assert refused.json()["code"] == "throttled"
    assert 1 <= int(refused["Retry-After"]) <= 3600
    assert "2 papers read without storing a submission this hour" in refused.json()["detail"]
    assert _api(UserFactory()).post(EXTRACT, {"file": _tex()}, format="multipart").status_code == (
        200
    )


def test_submissions_refused_at_reading_count_and_accepted_ones_do_not(settings) -> None:
    settings.CHECKLIST_PAPER_CHECKS_PER_HOUR = 2
    settings.CHECKLIST_DAILY_LIMIT = 10
    member = MembershipFactory()
    api = _api(member.user)
    url = reverse("api:checklist-submission-list")
    assert api.post(url, {"genuine": _tex()}, format="multipart").status_code == 201
    assert api.post(url, {"genuine": _tex()}, format="multipart").status_code == 201
    for _ in range(2):
        refused = api.post(url, {"genuine": _unreadable()}, format="multipart")
        assert refused.status_code == 400
        assert refused.json()["errors"][0]["field"] == "genuine"
    # Two refused reads spent the hour's allowance: even a good paper waits now, unread.
    spent = api.post(url, {"genuine": _tex()}, format="multipart")
    assert spent.status_code == 429 and int(spent["Retry-After"]) >= 1
    assert ChecklistSubmission.objects.count() == 2
    # The preview draws on the same allowance.
    assert api.post(EXTRACT, {"file": _tex()}, format="multipart").status_code == 429


def test_previews_have_a_ten_minute_allowance_inside_the_hour_s(settings) -> None:
    settings.CHECKLIST_PAPER_CHECKS_PER_HOUR = 30
    settings.CHECKLIST_PAPER_CHECKS_PER_10_MIN = 2
    client = _api(UserFactory())
    codes = [client.post(EXTRACT, {"file": _tex()}, format="multipart").status_code for _ in "abc"]
    assert codes == [200, 200, 429]
    refused = client.post(EXTRACT, {"file": _tex()}, format="multipart")
    detail = refused.json()["detail"]
    assert "2 papers read without storing a submission in the last 10 minutes" in detail
    assert 1 <= int(refused["Retry-After"]) <= 600
