"""Shared set-up of the notification tests: an ended audit run with metrics, its creator."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from benchmarks_app.models import AuditRepoResult, EvaluationRun, RunStatus
from scoring.audit.metrics import repo_metrics
from tests.factories.common import RepoFactory, RunFactory, UserFactory


def ended_run(
    *, user: Any = None, status: str = RunStatus.SUCCEEDED, error: str = ""
) -> EvaluationRun:
    """An audit run of ``user`` that ended with ``status``; succeeded ones have repo metrics."""
    user = user if user is not None else UserFactory.create()
    now = timezone.now()
    run = RunFactory.create(
        created_by=user,
        status=status,
        error=error,
        started_at=now - timedelta(minutes=3),
        finished_at=now,
    )
    if status == RunStatus.SUCCEEDED:
        assert run.scanner is not None
        repo = RepoFactory.create()
        run.repos.add(repo)
        AuditRepoResult.objects.create(
            run=run,
            repo=repo,
            scanner=run.scanner,
            metrics=repo_metrics(
                repo=repo.project_id,
                truth_severities=["High", "High", "Medium"],
                scan_severities=["High", "Medium", "Low", "Low"],
                tp=1,
                partial=1,
            ),
        )
    return run
