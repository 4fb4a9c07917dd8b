"""Scan results are versioned: runs keep the version they judged, re-imports never rewrite it."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.db.models import RestrictedError
from django.test import Client
from django.urls import reverse

from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    EvaluationRun,
    MatchOutcome,
    Repo,
    ScanFinding,
    Scanner,
    ScanResult,
)
from benchmarks_app.models.audit import AuditRunScan
from benchmarks_app.selectors.audit import audit_leaderboard, audit_run_detail
from benchmarks_app.services.audit import (
    ImportReport,
    audit_import_uploads,
    audit_run_create,
    audit_scan_result_make_current,
)
from benchmarks_app.services.runs import run_resume, run_wait
from tests.benchmarks_app.audit.conftest import fake_verdict
from tests.factories.audit import repo_with_scan
from tests.scoring.judges.fake_openai import FakeOpenAI, error_body

pytestmark = pytest.mark.django_db

TRUTH = {
    "project_id": "p1",
    "vulnerabilities": [
        {
            "finding_id": "H-01",
            "severity": "high",
            "title": "Reentrancy in withdraw",
            "description": "Vault.withdraw sends ETH before updating balances.",
        },
        {
            "finding_id": "M-01",
            "severity": "medium",
            "title": "Oracle price staleness",
            "description": "Oracle.getPrice never checks updatedAt, so stale prices are used.",
        },
    ],
}
REENTRANCY = {
    "title": "Reentrancy in withdraw allows draining",
    "description": "Vault.withdraw sends ETH before updating balances; re-enter to drain.",
    "severity": "high",
}
GAS = {"title": "Unbounded loop in distribute", "description": "Gas grows.", "severity": "low"}
ORACLE = {
    "title": "Oracle price staleness",
    "description": "Oracle.getPrice does not check updatedAt; stale prices are accepted.",
    "severity": "medium",
}
V1 = {"project": "p1", "findings": [REENTRANCY, GAS], "token_usage": {"total": 10}}
# Different findings, and the reentrancy one at another index.
V2 = {"project": "p1", "findings": [ORACLE, REENTRANCY]}


def _import(scan: Any, *, name: str = "p1_results.json") -> ImportReport:
    return audit_import_uploads(
        files=[("p1.json", json.dumps(TRUTH).encode()), (name, json.dumps(scan).encode())],
        scanner="tool",
        dataset="ds",
    )


def _evaluate() -> EvaluationRun:
    return run_wait(run=audit_run_create(scanner=Scanner.objects.get(name="tool")))


def _report(run: EvaluationRun) -> dict[str, Any]:
    out = io.StringIO()
    args = ["--scanner", "tool", "--run", str(run.pk), "--format", "json"]
    call_command("audit_report", *args, stdout=out)
    return json.loads(out.getvalue())


def _links(run: EvaluationRun) -> list[tuple[str, int | None, int | None]]:
    return [
        (
            r.truth_finding.finding_id,
            r.scan_finding_id,
            r.scan_finding.index if r.scan_finding else None,
        )
        for r in AuditTruthResult.objects.filter(run=run).select_related("scan_finding")
    ]


def test_reimporting_the_same_file_adds_nothing() -> None:
    first = _import(V1)
    assert (first.scan_results_created, first.scan_findings_created) == (1, 2)
    before = list(ScanFinding.objects.order_by("id").values_list("id", "updated_at"))
    # Same findings under another file name, keys reordered, other metadata: same content.
    same = {"token_usage": {"total": 99}, "findings": [dict(reversed(REENTRANCY.items())), GAS]}
    again = _import(same, name="baseline_p1.json")
    assert not again.changed
    assert (again.scan_results_unchanged, again.scan_findings_created) == (1, 0)
    result = ScanResult.objects.get()
    assert (result.version, result.is_current, result.raw_metadata["token_usage"]) == (
        1,
        True,
        {"total": 10},
    )
    assert list(ScanFinding.objects.order_by("id").values_list("id", "updated_at")) == before
    assert "1 unchanged" in again.summary()


def test_changed_file_is_a_new_version_and_old_runs_stay_as_judged() -> None:
    _import(V1)
    old_run = _evaluate()
    assert old_run.status == "succeeded"
    v1 = ScanResult.objects.get()
    old_report = _report(old_run)
    old_links = _links(old_run)
    assert ("H-01", v1.findings.get(index=0).pk, 0) in old_links
    assert old_report["scan_versions"] == {"p1": 1}
    assert [r["scanner"] for r in audit_leaderboard()] == ["tool"]

    changed = _import(V2)
    assert (changed.scan_results_updated, changed.scan_findings_created) == (1, 2)
    assert "1 changed (new version)" in changed.summary()
    v1.refresh_from_db()
    v2 = ScanResult.objects.current().get()
    assert (v1.version, v1.is_current, v2.version, v2.is_current) == (1, False, 2, True)
    assert list(v1.findings.order_by("index").values_list("title", flat=True)) == [
        REENTRANCY["title"],
        GAS["title"],
    ]
    # The old run's report and its links to the findings it judged are untouched.
    assert _report(old_run) == old_report
    assert _links(old_run) == old_links
    assert AuditRepoResult.objects.get(run=old_run).scan_result == v1
    _, sections = audit_run_detail(user=AnonymousUser(), run_id=old_run.pk)
    assert (sections[0].scan_version, sections[0].scan_is_current) == (1, False)
    h01 = next(row for row in sections[0].rows if row["finding_id"] == "H-01")
    assert (h01["scan_index"], h01["scan_title"]) == (0, REENTRANCY["title"])
    # The replaced version's evaluation no longer ranks; the current one is not evaluated yet.
    assert audit_leaderboard() == []

    new_run = _evaluate()
    assert AuditRunScan.objects.get(run=new_run).scan_result == v2
    assert AuditRepoResult.objects.get(run=new_run).scan_result == v2
    matched = AuditTruthResult.objects.get(run=new_run, truth_finding__finding_id="H-01")
    assert matched.scan_finding is not None and matched.scan_finding.scan_result == v2
    assert matched.scan_finding.index == 1
    new_report = _report(new_run)
    assert new_report["scan_versions"] == {"p1": 2}
    assert new_report["repos"][0]["scan"] == 2
    board = audit_leaderboard()
    assert [(r["scanner"], r["run_ids"]) for r in board] == [("tool", [new_run.pk])]

    # Importing the first file again makes version 1 current again, adding nothing; the
    # leaderboard goes back to the run that judged it.
    back = _import(V1)
    assert (back.scan_results_restored, back.scan_findings_created) == (1, 0)
    assert ScanResult.objects.count() == 2 and ScanFinding.objects.count() == 4
    assert ScanResult.objects.current().get() == v1
    assert [r["run_ids"] for r in audit_leaderboard()] == [[old_run.pk]]


def test_resume_judges_the_version_the_run_started_with(openai_settings: Any) -> None:
    repo, v1 = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness"],
        findings=["Reentrancy when withdrawing", "Oracle price is stale"],
    )
    state = {"down": True}

    def handler(body: dict[str, Any]) -> Any:
        if state["down"] and "Title: Oracle staleness" in body["messages"][1]["content"]:
            return 503, error_body("overloaded")
        return fake_verdict(body)

    with FakeOpenAI(handler) as server:
        openai_settings.OPENAI_BASE_URL = server.base_url
        run = run_wait(run=audit_run_create(scanner=v1.scanner, judge="openai"))
        assert (run.status, run.failed_items) == ("failed", 1)

        # New results arrive while the run waits to be resumed.
        v2_findings = [{"title": "Oracle feed may be stale in v2", "severity": "high"}]
        report = audit_import_uploads(
            files=[(f"{repo.project_id}_results.json", json.dumps(v2_findings).encode())],
            scanner="tool",
        )
        assert report.scan_results_updated == 1
        v2 = ScanResult.objects.current().get()
        assert v2.version == 2

        state["down"] = False
        before = len(server.requests)
        run = run_wait(run=run_resume(run=run))
        assert (run.status, run.is_complete) == ("succeeded", True)
        asked = [r["messages"][1]["content"] for r in server.requests[before:]]
        assert asked and all("Oracle price is stale" in text for text in asked)
        assert not any("in v2" in text for text in asked)
    oracle = AuditTruthResult.objects.get(
        run=run, outcome=MatchOutcome.MATCH, scan_finding__index=1
    )
    assert oracle.scan_finding is not None and oracle.scan_finding.scan_result == v1
    complete = AuditRepoResult.objects.get(run=run, is_complete=True)
    assert complete.scan_result == v1 and complete.metrics["scan"] == 2
    assert set(AuditRepoResult.objects.filter(run=run).values_list("scan_result", flat=True)) == {
        v1.pk
    }


def test_at_most_one_current_version_and_one_per_content() -> None:
    _, v1 = repo_with_scan(truths=["t"], findings=["f"])
    with pytest.raises(IntegrityError), transaction.atomic():
        ScanResult.objects.create(scanner=v1.scanner, repo=v1.repo, version=2, content_hash="other")
    with pytest.raises(IntegrityError), transaction.atomic():
        ScanResult.objects.create(
            scanner=v1.scanner,
            repo=v1.repo,
            version=2,
            is_current=False,
            content_hash=v1.content_hash,
        )
    v2 = ScanResult.objects.create(
        scanner=v1.scanner, repo=v1.repo, version=2, is_current=False, content_hash="other"
    )
    assert audit_scan_result_make_current(scan_result=v2).is_current
    v1.refresh_from_db()
    assert not v1.is_current


def test_a_judged_version_cannot_be_deleted_alone() -> None:
    _import(V1)
    v1 = ScanResult.objects.get()
    run = _evaluate()
    linked = AuditTruthResult.objects.filter(run=run).exclude(scan_finding=None)
    assert linked.count() == 1
    with pytest.raises(RestrictedError), transaction.atomic():
        v1.delete()
    assert linked.count() == 1
    # With its scanner, everything goes (runs included).
    v1.scanner.delete()
    assert not ScanResult.objects.exists() and not EvaluationRun.objects.exists()


def test_repo_and_scanner_listings_count_current_versions() -> None:
    _import(V1)
    _import(V2)
    repo: Any = Repo.objects.with_counts().get()
    scanner: Any = Scanner.objects.with_counts().get()
    assert (repo.scan_result_count, scanner.scan_result_count) == (1, 1)
    assert ScanResult.objects.count() == 2


def test_admin_lists_versions_filters_current_and_makes_one_current() -> None:
    _import(V1)
    _import(V2)
    admin = get_user_model().objects.create_superuser("admin", password="x")
    client = Client()
    client.force_login(admin)
    url = reverse("admin:benchmarks_app_scanresult_changelist")
    listed = client.get(url).context["cl"].result_list
    assert sorted((r.version, r.is_current) for r in listed) == [(1, False), (2, True)]
    current = client.get(url, {"is_current__exact": "1"}).context["cl"].result_list
    assert [r.version for r in current] == [2]
    v1 = ScanResult.objects.get(version=1)
    done = client.post(url, {"action": "make_current", "_selected_action": [v1.pk]}, follow=True)
    assert "Current now: tool on p1 (v1)" in done.content.decode()
    assert ScanResult.objects.current().get() == v1
