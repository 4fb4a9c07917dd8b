# mypy: disable-error-code="union-attr,arg-type"
"""One shape across the API (issue 26, item 18): audit board rows carry ``tied``, ``phase``
and ``run_id`` as probe rows do; the checklist submissions list is paginated like every
list; an unknown repo or dataset is named in the 404."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import EvaluationRun
from tests.benchmarks_app.audit.test_phase_pages import HIT, repo, signed_in, submitted
from tests.factories.checklist import ChecklistSubmissionFactory, MembershipFactory

pytestmark = pytest.mark.django_db
__all__ = ["repo"]  # the fixture, imported for these tests


@pytest.fixture
def user(db: Any) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("participant", password="pw")


def test_audit_board_rows_have_tied_phase_and_run_id(user: Any, repo: Any) -> None:
    run = submitted(signed_in(user), repo, [HIT])
    answer = APIClient().get("/api/audit/leaderboard/", {"dataset": "ds"})
    assert answer.status_code == 200
    [row] = answer.json()["results"]
    assert row["scanner"] == run.scanner.name
    assert (row["tied"], row["phase"], row["run_id"]) == (False, None, run.pk)
    # The same keys as a probe board's rows.
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    props = schema["components"]["schemas"]["AuditLeaderboardRow"]["properties"]
    assert {"tied", "phase", "run_id"} <= set(props)


def test_checklist_submissions_list_is_paginated(client: Any) -> None:
    m = MembershipFactory()
    for _ in range(3):
        ChecklistSubmissionFactory(team=m.team, status="extracted")
    api = APIClient()
    api.force_authenticate(m.user)
    url = reverse("api:checklist-submission-list")
    body = api.get(url, {"page_size": 2}).json()
    assert set(body) >= {"count", "next", "previous", "results"}
    assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]
    rest = api.get(url, {"page_size": 2, "page": 2}).json()
    assert len(rest["results"]) == 1 and rest["next"] is None
    ids = {r["id"] for r in body["results"]} | {r["id"] for r in rest["results"]}
    assert len(ids) == 3


def test_unknown_repo_and_dataset_are_named(user: Any, repo: Any) -> None:
    api = APIClient()
    api.force_authenticate(user)
    answer = api.post(
        "/api/audit/repos/code4rena_nope_2025_01/results/?scanner=t", [HIT], format="json"
    )
    assert answer.status_code == 404
    assert "code4rena_nope_2025_01" in answer.json()["detail"]
    assert answer.json()["errors"][0]["field"] == "project_id"
    answer = api.post("/api/audit/datasets/nope/results/?scanner=t", {}, format="json")
    assert answer.status_code == 404 and "'nope'" in answer.json()["detail"]
    assert not EvaluationRun.objects.exists()
