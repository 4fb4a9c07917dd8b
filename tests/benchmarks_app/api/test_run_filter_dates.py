"""Date filters of /api/runs/ hold on any valid ISO 8601 offset, on every database."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks_app.models import EvaluationRun

pytestmark = pytest.mark.django_db


def test_offsets_beyond_postgresqls_range_are_turned_into_utc() -> None:
    run = EvaluationRun.objects.create(benchmark="probes", judge="rules")
    api = APIClient()
    # +16:04 is valid ISO 8601 but beyond what PostgreSQL accepts: once in UTC it is fine.
    later = api.get("/api/runs/", {"created_before": "4333-05-04T11:24:49+16:04"})
    assert later.status_code == 200, later.content
    assert [r["id"] for r in later.json()["results"]] == [run.pk]
    # The same instant written two ways selects the same runs.
    just_after = timezone.now() + timedelta(minutes=1)
    as_utc = just_after.astimezone(UTC).isoformat()
    as_far_east = just_after.astimezone(timezone.get_fixed_timezone(16 * 60 + 30)).isoformat()
    a = api.get("/api/runs/", {"created_before": as_utc}).json()["results"]
    b = api.get("/api/runs/", {"created_before": as_far_east}).json()["results"]
    assert [r["id"] for r in a] == [r["id"] for r in b] == [run.pk]
    earlier = api.get("/api/runs/", {"created_before": "0001-01-01T00:10:00+16:04"})
    assert earlier.status_code == 400
    [error] = earlier.json()["errors"]
    assert error["field"] == "created_before" and "cannot be expressed in UTC" in error["reason"]


def test_a_challenge_filter_with_a_nul_is_refused_naming_the_parameter() -> None:
    # NUL reached PostgreSQL as an error (a 500); it is now refused before any view runs.
    response = APIClient().get("/api/checklist/leaderboard/", {"challenge": "\x19\xb7\x00"})
    assert response.status_code == 400 and response.json()["detail"].startswith("challenge")


def test_a_challenge_filter_that_is_no_slug_is_an_empty_board() -> None:
    response = APIClient().get("/api/checklist/leaderboard/", {"challenge": "\x19\xb7"})
    assert response.status_code == 200 and response.json()["results"] == []
