"""``/api/runs/<id>/`` gives the run's headline metrics whatever its benchmark, null while the
run is active; runs stay visible only to whom they were before."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    ChecklistScore,
    MatchOutcome,
    ProbeRunReport,
    RunStatus,
    Scanner,
)
from benchmarks_app.services.audit import audit_run_create
from benchmarks_app.services.runs import run_wait
from tests.factories.audit import repo_with_scan
from tests.factories.common import ChecklistRunFactory, ProbeRunFactory, UserFactory, join

pytestmark = pytest.mark.django_db


def test_an_audit_run_gives_its_overall_precision_recall_and_f1(api: Any) -> None:
    repo_with_scan(
        truths=["Reentrancy in withdraw", "Oracle staleness"],
        findings=["Reentrancy when withdrawing", "Gas", "Naming"],
    )
    run = audit_run_create(scanner=Scanner.objects.get(name="tool"), judge="offline")
    assert api.get(f"/api/runs/{run.pk}/").json()["metrics"] is None  # queued: nothing yet
    run = run_wait(run=run)

    data = api.get(f"/api/runs/{run.pk}/").json()
    stored = AuditRepoResult.objects.get(run=run).metrics  # one repo: overall == the repo's
    metrics = data["metrics"]
    for key in ("precision", "recall", "f1", "f1_with_partial", "tp", "partial", "fn"):
        assert metrics[key] == stored[key], key
    matched = AuditTruthResult.objects.filter(run=run, outcome=MatchOutcome.MATCH).count()
    assert metrics["tp"] == matched and metrics["truth"] == 2 and metrics["scan"] == 3
    assert metrics["is_complete"] is True and metrics["repos"] == 1
    assert data["items"].endswith(f"/api/runs/{run.pk}/items/")


def test_a_probe_run_gives_its_report_summary(api: Any) -> None:
    run = ProbeRunFactory.create(status=RunStatus.SUCCEEDED, is_complete=True)
    assert run.probe_submission is not None
    ProbeRunReport.objects.create(
        run=run,
        submission=run.probe_submission,
        metrics={"counts": {"evaluated": 4}, "suite_version": "v1"},
        resilience_index=0.61,
        pass_rate=0.75,
        severity_weighted_pass_rate=0.7,
        high_stakes_failure_rate=0.25,
        ci={"metric": "resilience_index", "low": 0.5, "high": 0.7},
    )
    metrics = api.get(f"/api/runs/{run.pk}/").json()["metrics"]
    assert metrics["resilience_index"] == pytest.approx(0.61)
    assert metrics["pass_rate"] == pytest.approx(0.75)
    assert metrics["high_stakes_failure_rate"] == pytest.approx(0.25)
    assert metrics["resilience_index_ci"] == [0.5, 0.7]
    assert (metrics["cases"], metrics["suite_version"]) == (4, "v1")


def test_a_checklist_run_gives_its_score_to_its_team_only(api: Any) -> None:
    run = ChecklistRunFactory.create(status=RunStatus.SUCCEEDED, is_complete=True)
    submission = run.checklist_submission
    assert submission is not None
    ChecklistScore.objects.create(
        run=run, submission=submission, c_g=0.8, c_a=0.6, c_t=0.4, r=0.5, s=0.3
    )
    member, outsider = UserFactory.create(), UserFactory.create()
    join(member, submission.team)

    api.force_authenticate(outsider)
    assert api.get(f"/api/runs/{run.pk}/").status_code == 404
    api.force_authenticate(member)
    metrics = api.get(f"/api/runs/{run.pk}/").json()["metrics"]
    assert {k: metrics[k] for k in ("c_g", "c_a", "c_t", "r", "s")} == {
        "c_g": 0.8,
        "c_a": 0.6,
        "c_t": 0.4,
        "r": 0.5,
        "s": 0.3,
    }
    assert metrics["s_ci"] is None


def test_a_failed_run_without_results_has_no_metrics(api: Any) -> None:
    run = ProbeRunFactory.create(status=RunStatus.FAILED, error="boom")
    assert api.get(f"/api/runs/{run.pk}/").json()["metrics"] is None
