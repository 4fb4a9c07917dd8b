"""The judge-call ledger in the admin: run and item links, the verdict a call gave, a filter
by run, and a link from the run's page to its calls."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from benchmarks_app.models import JudgeCacheEntry, JudgeCall, RunPiece
from tests.factories.common import RunFactory, StaffFactory, UserFactory

pytestmark = pytest.mark.django_db
CHANGELIST = "admin:benchmarks_app_judgecall_changelist"


@pytest.fixture
def ledger() -> dict[str, Any]:
    run, other = RunFactory.create(), RunFactory.create()
    piece = RunPiece.objects.create(run=run, key="acme_repo", attempt=2)
    ok = JudgeCall.objects.create(
        run=run,
        judge="openai",
        model="m1",
        prompt_hash="k" * 64,
        status="ok",
        holder=f"{piece.pk}:2",
    )
    JudgeCacheEntry.objects.create(
        key="k" * 64,
        judge="openai",
        model="m1",
        prompt_version="v1",
        response={"is_match": True, "explanation": "VERDICT-TEXT"},
    )
    failed = JudgeCall.objects.create(
        run=run,
        judge="openai",
        model="m1",
        prompt_hash="f" * 64,
        status="invalid",
        error="RAW-ANSWER: not json",
    )
    elsewhere = JudgeCall.objects.create(
        run=other, judge="openai", model="m2", prompt_hash="o" * 64, status="ok"
    )
    return {"run": run, "ok": ok, "failed": failed, "elsewhere": elsewhere}


def test_the_list_filters_by_run_and_names_the_item(client: Any, ledger: dict[str, Any]) -> None:
    client.force_login(StaffFactory.create(is_superuser=True))
    run = ledger["run"]
    page = client.get(reverse(CHANGELIST) + f"?run={run.pk}").content.decode()
    assert "repo acme_repo (lease attempt 2)" in page
    assert f"run #{run.pk}" in page
    assert f"run #{ledger['elsewhere'].run_id}<" not in page
    assert client.get(reverse(CHANGELIST) + "?run=abc").status_code == 200


def test_the_detail_shows_the_verdict_and_the_raw_failure(
    client: Any, ledger: dict[str, Any]
) -> None:
    client.force_login(StaffFactory.create(is_superuser=True))
    url = reverse("admin:benchmarks_app_judgecall_change", args=[ledger["ok"].pk])
    page = client.get(url).content.decode()
    assert "VERDICT-TEXT" in page and "Not stored" in page
    failed = reverse("admin:benchmarks_app_judgecall_change", args=[ledger["failed"].pk])
    assert "RAW-ANSWER: not json" in client.get(failed).content.decode()


def test_the_run_page_links_to_its_calls(client: Any, ledger: dict[str, Any]) -> None:
    client.force_login(StaffFactory.create(is_superuser=True))
    run = ledger["run"]
    page = client.get(
        reverse("admin:benchmarks_app_evaluationrun_change", args=[run.pk])
    ).content.decode()
    assert f"{reverse(CHANGELIST)}?run={run.pk}" in page
    assert "2 call(s)" in page and "1 invalid, 1 ok" in page


def test_participants_do_not_see_the_ledger(client: Any, ledger: dict[str, Any]) -> None:
    client.force_login(UserFactory.create())
    response = client.get(reverse(CHANGELIST))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_an_offline_call_says_it_asks_no_server(client: Any) -> None:
    run = RunFactory.create()
    call = JudgeCall.objects.create(
        run=run, judge="offline", prompt_hash="a" * 64, status="ok", prompt_key=""
    )
    client.force_login(StaffFactory.create(is_superuser=True))
    page = client.get(reverse("admin:benchmarks_app_judgecall_change", args=[call.pk]))
    body = page.content.decode()
    assert "asks no server" in body
    assert "recorded before the ledger kept raw responses" not in body
    assert f"Judge call #{call.pk} (offline, ok)" in body
