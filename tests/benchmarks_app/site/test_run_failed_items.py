"""A failed run's page lists its failed items by name and says when resuming will not help."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks_app.models import RunStatus, Scanner
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_wait
from tests.factories.audit import repo_with_scan

pytestmark = pytest.mark.django_db


def _row(index: int) -> dict[str, object]:
    return {
        "is_fp": False,
        "is_match": index >= 0,
        "is_partial_match": False,
        "index_of_finding_from_junior_auditor": index,
        "explanation": "recorded",
        "severity_from_junior_auditor": "High",
        "severity_from_truth": "High",
    }


def test_the_run_page_names_the_failed_truth_finding_and_the_resume_blocker(
    client, admin_client, tmp_path: Path
) -> None:
    repo, _ = repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness"],
        findings=["Reentrancy when withdrawing", "Gas"],
    )
    (tmp_path / f"{repo.project_id}_results.json").write_text(json.dumps([_row(0)]))
    run = run_wait(
        run=audit_run_create(scanner=Scanner.objects.get(name="tool"), judge=f"replay:{tmp_path}")
    )
    assert run.status == RunStatus.FAILED

    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-role="failed-items"' in page
    assert f"repo {repo.project_id}: truth finding F-1 added after the recording" in page
    assert 'data-role="resume-blocker"' in page

    # A succeeded run has no failed-items block.
    (tmp_path / f"{repo.project_id}_results.json").write_text(json.dumps([_row(0), _row(-1)]))
    ok = run_wait(
        run=audit_run_create(scanner=Scanner.objects.get(name="tool"), judge=f"replay:{tmp_path}")
    )
    assert ok.status == RunStatus.SUCCEEDED
    assert 'data-role="failed-items"' not in admin_client.get(f"/runs/{ok.pk}/").content.decode()
