"""Lists cost the same number of queries whatever their length."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchmarks_app.models import RunStatus
from tests.factories.common import (
    ChecklistRunFactory,
    ChecklistSubmissionFactory,
    ProbeRunFactory,
    RepoFactory,
    ResponseSubmissionFactory,
    RunFactory,
    ScannerFactory,
    TeamFactory,
    TruthFindingFactory,
    UserFactory,
    join,
)

pytestmark = pytest.mark.django_db


def count_queries(call: Callable[[], object]) -> int:
    with CaptureQueriesContext(connection) as ctx:
        call()
    return len(ctx.captured_queries)


def _runs(n: int, user) -> None:
    team = user.memberships.first().team
    for _ in range(n):
        RunFactory.create(status=RunStatus.SUCCEEDED)
        ProbeRunFactory.create()
        ChecklistRunFactory.create(
            checklist_submission=ChecklistSubmissionFactory.create(team=team)
        )


def _repos(n: int, user) -> None:
    for _ in range(n):
        TruthFindingFactory.create_batch(2, repo=RepoFactory.create())


def _scanners(n: int, user) -> None:
    for _ in range(n):
        RunFactory.create(scanner=ScannerFactory.create())


def _submissions(n: int, user) -> None:
    team = user.memberships.first().team
    for _ in range(n):
        RunFactory.create(scanner=ScannerFactory.create(owner=user))
        ProbeRunFactory.create(probe_submission=ResponseSubmissionFactory.create(owner=user))
        ChecklistSubmissionFactory.create(team=team)


CASES = {
    "/api/runs/": _runs,
    "/api/benchmarks/": _runs,
    "/api/audit/repos/": _repos,
    "/api/audit/scanners/": _scanners,
    "/api/submissions/": _submissions,
}


@pytest.mark.parametrize("url", list(CASES))
def test_query_count_does_not_grow_with_rows(api, url, django_assert_num_queries):
    user = UserFactory.create()
    join(user, TeamFactory.create())
    api.force_authenticate(user)
    seed = CASES[url]

    seed(2, user)
    small = count_queries(lambda: api.get(url))
    seed(10, user)
    response = api.get(url)
    assert response.status_code == 200
    body = response.json()
    rows = body["results"] if isinstance(body, dict) else body
    assert len(rows) >= 3
    with django_assert_num_queries(small):
        api.get(url)


def test_repo_detail_query_count_does_not_grow_with_findings(api, django_assert_num_queries):
    repo = RepoFactory.create(is_public=True)
    TruthFindingFactory.create_batch(2, repo=repo)
    small = count_queries(lambda: api.get(f"/api/audit/repos/{repo.pk}/"))
    TruthFindingFactory.create_batch(20, repo=repo)
    with django_assert_num_queries(small):
        response = api.get(f"/api/audit/repos/{repo.pk}/")
    assert len(response.json()["truth_findings"]) == 22


def test_run_detail_query_count_does_not_grow_with_failed_items(api, django_assert_num_queries):
    from benchmarks_app.models import AuditTruthResult, MatchOutcome
    from scoring.judges import failures

    run = RunFactory.create(status=RunStatus.FAILED)
    repo = RepoFactory.create()

    def fail(n: int) -> None:
        for truth in TruthFindingFactory.create_batch(n, repo=repo):
            AuditTruthResult.objects.create(
                run=run,
                repo=repo,
                truth_finding=truth,
                outcome=MatchOutcome.JUDGE_FAILED,
                votes=[{"error": failures.tag(failures.CONTEXT, f"too long {truth.pk}")}],
            )
        run.failed_items = AuditTruthResult.objects.filter(run=run).count()
        run.save(update_fields=["failed_items"])

    fail(2)
    small = count_queries(lambda: api.get(f"/api/runs/{run.pk}/"))
    fail(10)
    with django_assert_num_queries(small):
        response = api.get(f"/api/runs/{run.pk}/")
    causes = response.json()["failure_causes"]
    assert sum(c["count"] for c in causes) == 12 and {c["kind"] for c in causes} == {"context"}
