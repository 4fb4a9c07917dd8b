from __future__ import annotations

import json
from typing import Any, cast

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.authtoken.models import Token

from benchmarks_app.models import EvaluationRun, Repo, Scanner, ScanResult, TruthFinding
from benchmarks_app.selectors.audit import audit_leaderboard
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_wait
from tests.benchmarks_app.audit.conftest import publish_dataset
from tests.factories.audit import (
    ScanFindingFactory,
    ScannerFactory,
    ScanResultFactory,
    TruthFindingFactory,
    repo_with_scan,
)

pytestmark = pytest.mark.django_db

SECRET = "The secret exploit path through Vault.withdraw"


def _evaluated(scanner: str = "tool", public: bool = True) -> EvaluationRun:
    """``scanner``'s results on the one repo of dataset ``ds`` (made by the first call)."""
    findings = ["Reentrancy in withdraw allows draining", "Unrelated"]
    repo = Repo.objects.filter(datasets__slug="ds").first()
    if repo is None:
        repo, result = repo_with_scan(
            truths=["Reentrancy in withdraw", "Oracle staleness"],
            findings=findings,
            scanner=scanner,
        )
        repo.is_public = public
        repo.save()
        TruthFinding.objects.filter(repo=repo).update(description=SECRET)
        publish_dataset(repo)
    else:
        result = cast(
            ScanResult, ScanResultFactory(repo=repo, scanner=ScannerFactory(name=scanner))
        )
        for i, title in enumerate(findings):
            ScanFindingFactory(scan_result=result, index=i, title=title)
    return run_wait(run=audit_run_create(scanner=result.scanner, judge="offline"))


def test_leaderboard_page_and_scanner_report() -> None:
    run = _evaluated()
    assert run.status == "succeeded"
    page = Client().get("/audit/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "tool" in html and reverse("audit:scanner", args=["tool"]) in html
    report = Client().get("/audit/scanners/tool/?format=json").json()
    assert report["scanner"] == "tool" and report["overall"]["truth"] == 2
    md = Client().get("/audit/scanners/tool/?format=md").content.decode()
    assert "| Repo | Truth | AI Scan |" in md


def test_empty_leaderboard_says_what_to_do() -> None:
    html = Client().get("/audit/").content.decode()
    assert "evaluate_audit" in html


def test_run_page_hides_truth_of_private_repos_from_the_public() -> None:
    run = _evaluated(public=False)
    html = Client().get(f"/audit/runs/{run.pk}/").content.decode()
    # A hidden repo's truth titles are hidden too (a scanner could report them verbatim);
    # the finding ids and severities stay, and the scanner's own findings are its own.
    assert "Oracle staleness" not in html and "Reentrancy in withdraw<span" not in html
    assert "F-0" in html and "F-1" in html
    assert "Reentrancy in withdraw allows draining" in html
    assert "explanation" not in html and "similarity" not in html
    staff = get_user_model().objects.create_user("staff", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    staff_html = client.get(f"/audit/runs/{run.pk}/").content.decode()
    assert "Judge's explanation" in staff_html and "similarity" in staff_html
    assert "Oracle staleness" in staff_html and "Reentrancy in withdraw<span" in staff_html


def test_leaderboard_query_count_constant() -> None:
    _evaluated("one")
    with CaptureQueriesContext(connection) as small:
        audit_leaderboard()
    for name in ("two", "three", "four"):
        _evaluated(name)
    with CaptureQueriesContext(connection) as big:
        rows = audit_leaderboard()
    assert len(rows) == 4
    assert len(big.captured_queries) == len(small.captured_queries)


def test_api_leaderboard_and_report() -> None:
    _evaluated()
    rows = Client().get("/api/audit/leaderboard/").json()["results"]
    assert rows[0]["scanner"] == "tool" and rows[0]["repos_evaluated"] == 1
    assert Client().get("/api/audit/reports/tool/").json()["overall"]["repo"] == "ALL"
    assert Client().get("/api/audit/reports/nobody/").status_code == 404
    assert Client().get("/api/audit/reports/tool/?run=x").status_code == 400


def test_api_submit_requires_auth_and_queues_a_run() -> None:
    repo = Repo.objects.create(project_id="p1", name="P1")
    TruthFindingFactory(repo=repo, title="Reentrancy in withdraw")
    url = "/api/audit/repos/p1/results/?scanner=mytool"
    body = {
        "project": "p1",
        "findings": [{"title": "Reentrancy in withdraw", "description": "d", "severity": "high"}],
    }
    assert Client().post(url, body, content_type="application/json").status_code in (401, 403)
    user = get_user_model().objects.create_user("u", password="x")
    token = Token.objects.create(user=user)
    auth: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Token {token.key}"}
    response = Client().post(url, json.dumps(body), content_type="application/json", **auth)
    assert response.status_code == 202, response.content
    run = EvaluationRun.objects.get(pk=response.json()["run"])
    assert (
        run.scanner is not None and run.scanner.name == "mytool" and list(run.repos.all()) == [repo]
    )
    assert run_wait(run=run).status == "succeeded"
    assert Scanner.objects.get(name="mytool").owner == user
    # A list body is accepted too; a broken one names the problem.
    listed = [{"title": "x", "description": "y", "severity": "low"}]
    ok = Client().post(url, json.dumps(listed), content_type="application/json", **auth)
    assert ok.status_code == 202
    assert ScanResult.objects.current().get(scanner__name="mytool").findings.count() == 1
    assert ok.json()["findings"] == 1
    # The first submission's version stays, with the run that judged it.
    first = ScanResult.objects.get(scanner__name="mytool", version=1)
    assert not first.is_current and first.findings.count() == 1
    assert first.repo_results.get().run == run
    bad = Client().post(
        url,
        json.dumps([{"title": "x", "severity": "urgent"}]),
        content_type="application/json",
        **auth,
    )
    assert bad.status_code == 400 and "urgent" in bad.content.decode()
    other = get_user_model().objects.create_user("other", password="x")
    other_auth: dict[str, Any] = {
        "HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=other).key}"
    }
    denied = Client().post(url, json.dumps(listed), content_type="application/json", **other_auth)
    assert denied.status_code == 403


def test_api_repo_list_never_leaks_private_truth() -> None:
    _evaluated(public=False)
    text = Client().get("/api/audit/repos/").content.decode()
    repo = Repo.objects.get()
    detail = Client().get(f"/api/audit/repos/{repo.pk}/").content.decode()
    assert SECRET not in text and SECRET not in detail


def test_admin_upload_and_evaluate_action() -> None:
    admin = get_user_model().objects.create_superuser("admin", password="x")
    client = Client()
    client.force_login(admin)
    truth = {
        "project_id": "p5",
        "vulnerabilities": [
            {
                "finding_id": "H-1",
                "severity": "high",
                "title": "Reentrancy in withdraw",
                "description": "d",
            }
        ],
    }
    response = client.post(
        reverse("admin:benchmarks_app_repo_import"),
        {
            "files": [
                SimpleUploadedFile("p5.json", json.dumps(truth).encode()),
                SimpleUploadedFile(
                    "p5_results.json",
                    json.dumps([{"title": "Reentrancy in withdraw", "severity": "high"}]).encode(),
                ),
                SimpleUploadedFile("empty_results.json", b""),
            ],
            "kind": "auto",
            "scanner": "uploaded",
        },
        follow=True,
    )
    page = response.content.decode()
    assert "Skipped empty_results.json: empty file" in page
    repo = Repo.objects.get(project_id="p5")
    assert repo.truth_findings.count() == 1
    changelist = reverse("admin:benchmarks_app_repo_changelist")
    form = client.post(changelist, {"action": "evaluate_with", "_selected_action": [repo.pk]})
    assert "Queue the run" in form.content.decode()
    scanner = Scanner.objects.get(name="uploaded")
    done = client.post(
        changelist,
        {
            "action": "evaluate_with",
            "_selected_action": [repo.pk],
            "evaluate": "1",
            "scanner": scanner.pk,
            "judge": "offline",
        },
    )
    assert done.status_code == 302
    run = EvaluationRun.objects.get()
    assert run.scanner == scanner and run.judge == "offline"


@pytest.mark.parametrize("dropped", ["precision", "f1_with_partial", "fp", "scan_severity_counts"])
def test_scanner_page_reads_a_stored_result_missing_a_metric(dropped: str) -> None:
    """Stored metrics outlive the code that wrote them: a row without a key is completed from
    its counts (the scanner page once answered 500 with ``KeyError: 'precision'``)."""
    from benchmarks_app.models import AuditRepoResult

    run = _evaluated()
    stored = AuditRepoResult.objects.filter(run=run).get()
    complete = dict(stored.metrics)
    AuditRepoResult.objects.filter(pk=stored.pk).update(
        metrics={k: v for k, v in complete.items() if k != dropped}
    )
    page = Client().get(f"/audit/scanners/tool/?run={run.pk}")
    assert page.status_code == 200
    report = Client().get(f"/audit/scanners/tool/?run={run.pk}&format=json").json()
    repo = report["repos"][0]
    # Recomputed from the counts, the ratios are what the complete row said.
    for key in ("precision", "recall", "f1", "f1_with_partial", "fp"):
        assert repo[key] == complete[key], key
    run_page = Client().get(f"/audit/runs/{run.pk}/")
    assert run_page.status_code == 200
    assert f"{100 * complete['f1_with_partial']:.1f}%" in run_page.content.decode()


def test_the_board_shows_essential_columns_first_and_the_rest_on_request() -> None:
    """Rank, scanner, F1+ with its interval and the rank range by default; the counts and the
    other ratios behind "Show all columns"; every column has a header."""
    import re

    run = _evaluated()
    html = Client().get("/audit/").content.decode()
    table = html[html.index('id="audit-leaderboard-table"') :]
    table = table[: table.index("</thead>")]
    headers = re.findall(r"<th\b([^>]*)>(.*?)</th>", table, re.S)
    shown = [re.sub(r"<[^>]+>|[↕▲▼]", "", label).strip() for cls, label in headers]
    essential = [s for (cls, _), s in zip(headers, shown, strict=True) if "col-detail" not in cls]
    assert essential == [
        "#",
        "Scanner",
        "F1+",
        "95% CI",
        "Rank range",
        "Tied",
        "Baseline",
    ]
    assert all(shown), shown
    detail = [s for (cls, _), s in zip(headers, shown, strict=True) if "col-detail" in cls]
    assert {"TP", "FP", "P", "R", "P+", "R+", "F1+ low"} <= set(detail)
    assert "Show all columns" in html
    # One format per metric: F1+ reads the same on the board and on the home page.
    from benchmarks_app.models.audit import AuditBoardRow

    f1 = AuditBoardRow.objects.get(scanner=run.scanner, phase__isnull=True).metrics[
        "f1_with_partial"
    ]
    shown_f1 = f"{100 * f1:.1f}%"
    assert shown_f1 in html
    home = Client().get("/").content.decode()
    assert shown_f1 in home and f"{f1:.3f}" not in home
