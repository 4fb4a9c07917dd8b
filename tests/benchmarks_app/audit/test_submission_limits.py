"""What participants' audit submissions may cost: the paid judge is opt-in, a daily limit per
user, and an empty result (a scanner that found nothing) scored without errors."""

from __future__ import annotations

import html
import json
import threading
from datetime import timedelta
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import (
    AuditRepoResult,
    EvaluationRun,
    Repo,
    RunStatus,
    ScanFinding,
    Scanner,
    ScanResult,
)
from benchmarks_app.selectors.audit import audit_report
from benchmarks_app.selectors.audit_submission_quota import audit_submission_quota
from benchmarks_app.services.audit import AuditQuotaExceeded, AuditRunError, audit_scan_submit
from scoring.audit.metrics import render_markdown
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import RepoFactory, TruthFindingFactory

pytestmark = pytest.mark.django_db

FINDINGS = [
    {"title": "Reentrancy in Vault.withdraw", "description": "Drains funds.", "severity": "high"}
]
RESERVED = (
    "the openai judge is reserved for the site's staff here (every run costs paid API calls); "
    "choose offline"
)


@pytest.fixture
def repo(db: Any) -> Repo:
    repo = cast(Repo, RepoFactory(project_id="code4rena_vault_2025_01", name="Vault"))
    TruthFindingFactory(repo=repo, finding_id="H-01", order=0, title="Reentrancy in withdraw")
    TruthFindingFactory(repo=repo, finding_id="M-01", order=1, title="Oracle price is stale")
    return repo


@pytest.fixture
def openai_site(settings: Any) -> Any:
    settings.OPENAI_API_KEY = "sk-test"
    return settings


def post(user: Any, repo: Repo, body: Any = FINDINGS, query: str = "?scanner=mytool") -> Any:
    api = APIClient()
    api.force_authenticate(user)
    url = reverse("api:audit-submit", args=[repo.project_id]) + query
    return api.post(url, json.dumps(body), content_type="application/json")


def reasons(answer: Any, field: str) -> list[str]:
    return [e["reason"] for e in answer.json()["errors"] if e["field"] == field]


def stored() -> tuple[int, int, int, int]:
    return (
        Scanner.objects.count(),
        ScanResult.objects.count(),
        ScanFinding.objects.count(),
        EvaluationRun.objects.count(),
    )


def form_post(client: Any, user: Any, repo: Repo, **fields: Any) -> Any:
    client.force_login(user)
    data = {
        "repo": repo.project_id,
        "scanner": "mytool",
        "judge": "offline",
        "file": SimpleUploadedFile("results.json", json.dumps(FINDINGS).encode()),
        **fields,
    }
    return client.post("/audit/submit/", data)


def page_text(answer: Any) -> str:
    return html.unescape(answer.content.decode())


# --- the paid judge -------------------------------------------------------------------------


def test_participants_cannot_pick_openai_unless_the_site_opts_in(
    client: Any, user: Any, repo: Repo, openai_site: Any
) -> None:
    refused = post(user, repo, query="?scanner=mytool&judge=openai")
    assert refused.status_code == 400 and reasons(refused, "judge") == [RESERVED]
    page = form_post(client, user, repo, judge="openai")
    assert page.status_code == 400
    assert page.context["form"].errors["judge"] == [RESERVED]
    assert stored() == (0, 0, 0, 0)

    openai_site.AUDIT_PARTICIPANT_OPENAI = True
    accepted = post(user, repo, query="?scanner=mytool&judge=openai")
    assert accepted.status_code == 202, accepted.content
    assert EvaluationRun.objects.get().judge == "openai"


def test_staff_may_always_pick_openai(staff: Any, repo: Repo, openai_site: Any) -> None:
    answer = post(staff, repo, query="?scanner=curated&judge=openai")
    assert answer.status_code == 202, answer.content
    run = EvaluationRun.objects.get()
    assert (run.judge, run.created_by) == ("openai", staff)


def test_a_paid_site_default_falls_back_to_offline_for_participants(
    user: Any, staff: Any, repo: Repo, openai_site: Any
) -> None:
    openai_site.JUDGE_DEFAULT = "openai"
    assert post(user, repo).status_code == 202
    assert post(staff, repo, query="?scanner=curated").status_code == 202
    judges = dict(EvaluationRun.objects.values_list("created_by__username", "judge"))
    assert judges == {"participant": "offline", "curator": "openai"}


def test_openai_without_access_keeps_the_configuration_message(user: Any, repo: Repo) -> None:
    answer = post(user, repo, query="?scanner=mytool&judge=openai")
    assert reasons(answer, "judge") == [
        "openai needs OPENAI_API_KEY (or OPENAI_BASE_URL) to be set"
    ]


# --- the daily limit ------------------------------------------------------------------------


def test_daily_limit_refuses_the_next_submission_with_the_field_named(
    client: Any, user: Any, staff: Any, repo: Repo, settings: Any
) -> None:
    settings.AUDIT_DAILY_SUBMISSIONS = 2
    assert post(user, repo).status_code == 202
    # A refused submission stores nothing, so it does not count.
    assert post(user, repo, body={"findings": "x"}).status_code == 400
    assert post(user, repo, body=[{**FINDINGS[0], "title": "v2"}]).status_code == 202
    before = stored()

    refused = post(user, repo)
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 24 * 3600
    [reason] = reasons(refused, "submissions")
    assert reason.startswith("the daily limit of 2 audit submission(s) is reached (2 today)")
    assert "UTC" in reason
    page = form_post(client, user, repo)
    assert page.status_code == 400 and f"submissions: {reason}" in page_text(page)
    assert stored() == before

    quota = audit_submission_quota(user=user)
    assert (quota.daily_limit, quota.used_today, quota.remaining) == (2, 2, 0)
    # Staff are not limited; another participant has a limit of their own.
    assert post(staff, repo, query="?scanner=curated").status_code == 202
    rival = get_user_model().objects.create_user("rival", password="pw")
    assert post(rival, repo, query="?scanner=rivaltool").status_code == 202

    # Yesterday's submissions do not count today.
    EvaluationRun.objects.filter(created_by=user).update(
        created_at=quota.resets_at - timedelta(days=1, seconds=1)
    )
    assert post(user, repo).status_code == 202


def test_zero_allows_no_submission_and_none_any_number(
    user: Any, repo: Repo, settings: Any
) -> None:
    settings.AUDIT_DAILY_SUBMISSIONS = 0
    with pytest.raises(AuditRunError, match=r"^submissions: the daily limit of 0"):
        audit_scan_submit(user=user, scanner_name="mytool", repo=repo, data=FINDINGS)
    settings.AUDIT_DAILY_SUBMISSIONS = None
    for i in range(3):
        # Different findings each time: an identical re-upload would store nothing.
        data = [{**FINDINGS[0], "description": f"Drains funds ({i})."}]
        audit_scan_submit(user=user, scanner_name="mytool", repo=repo, data=data)
    assert audit_submission_quota(user=user).remaining is None
    assert EvaluationRun.objects.count() == 3


def test_the_limit_is_counted_under_a_lock_on_the_user(user: Any, repo: Repo) -> None:
    with CaptureQueriesContext(connection) as queries:
        audit_scan_submit(user=user, scanner_name="mytool", repo=repo, data=FINDINGS)
    user_table = get_user_model()._meta.db_table
    # FOR NO KEY UPDATE: it excludes the other submissions of the user, not the foreign key
    # checks of rows that point at the user (those made a run's end wait, then deadlock).
    locks = [
        q["sql"] for q in queries if user_table in q["sql"] and "FOR NO KEY UPDATE" in q["sql"]
    ]
    if connection.features.has_select_for_update:
        assert len(locks) == 1
    else:
        # SQLite has no row locks: the IMMEDIATE transaction serializes writers instead.
        assert connection.settings_dict["OPTIONS"].get("transaction_mode") == "IMMEDIATE"


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_cannot_exceed_the_limit(settings: Any) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row-level locks; this test runs on PostgreSQL")
    settings.AUDIT_DAILY_SUBMISSIONS = 2
    user = get_user_model().objects.create_user("racer", password="pw")
    target = cast(Repo, RepoFactory(project_id="code4rena_race_2025_01"))
    TruthFindingFactory(repo=target, finding_id="H-01", order=0)
    threads_n = 6
    barrier = threading.Barrier(threads_n)
    outcomes: list[str] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        try:
            barrier.wait()
            data = [{**FINDINGS[0], "title": f"finding of thread {n}"}]
            audit_scan_submit(user=user, scanner_name="racer-tool", repo=target, data=data)
            result = "ok"
        except AuditQuotaExceeded:
            result = "limit"
        except Exception as exc:  # pragma: no cover - reported below
            result = f"error: {exc!r}"
        finally:
            connections.close_all()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["limit"] * 4 + ["ok"] * 2, outcomes
    assert EvaluationRun.objects.filter(created_by=user).count() == 2


def test_anonymous_users_cannot_submit(repo: Repo) -> None:
    with pytest.raises(PermissionError, match="sign in"):
        audit_scan_submit(user=AnonymousUser(), scanner_name="x", repo=repo, data=FINDINGS)
    assert stored() == (0, 0, 0, 0)


# --- an empty result ------------------------------------------------------------------------


@pytest.mark.parametrize("body", [[], {"project": "code4rena_vault_2025_01", "findings": []}])
def test_a_scanner_that_found_nothing_is_scored_without_errors(
    user: Any, repo: Repo, body: Any, django_capture_on_commit_callbacks: Any
) -> None:
    publish_dataset(repo)
    # Without saying the tool found nothing, an empty upload is refused by the repo's name.
    refused = post(user, repo, body=body)
    assert refused.status_code == 400
    assert "no findings for repo 'code4rena_vault_2025_01'" in refused.content.decode()
    assert EvaluationRun.objects.count() == 0
    declared = (
        {"declared_empty": True, "findings": body}
        if isinstance(body, list)
        else {
            **body,
            "declared_empty": True,
        }
    )
    with django_capture_on_commit_callbacks(execute=True):
        answer = post(user, repo, body=declared)
    assert answer.status_code == 202, answer.content
    assert answer.json()["findings"] == 0
    run = EvaluationRun.objects.get()
    assert run.status == RunStatus.SUCCEEDED and run.is_complete
    result = AuditRepoResult.objects.get(run=run)
    m = result.metrics
    assert (m["truth"], m["scan"], m["qa"], m["tp"], m["partial"], m["fp"], m["fn"]) == (
        2,
        0,
        0,
        0,
        0,
        0,
        2,
    )
    assert all(m[k] == 0.0 for k in ("precision", "recall", "f1", "precision_with_partial"))
    assert result.false_positive_indices == []
    assert any("no findings" in note for note in result.notes)

    report = audit_report(scanner_name="mytool")
    assert report["overall"]["fn"] == 2 and report["overall"]["precision"] == 0.0
    assert "| code4rena_vault_2025_01 | 2 | 0 | 0 | 0 | 0 | 0 | 2 | 0.0% |" in render_markdown(
        report
    )
    client = APIClient()
    client.force_login(user)
    page = client.get(f"/audit/runs/{run.pk}/")
    assert page.status_code == 200 and "no findings for this repo" in page_text(page)
