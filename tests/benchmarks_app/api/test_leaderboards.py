"""The three leaderboard endpoints, side by side: present, public, nulls last, flat in queries.

Rows are written by the same bulk seeding that ``make bench`` uses (real result rows, read
back by each benchmark's own selector).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import NoReverseMatch, reverse

from benchmarks_app.bench.api import seed_leaderboards
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db

BENCHMARKS = ["audit", "probes", "checklist"]


def leaderboard_url(bench: str) -> str:
    try:
        return reverse(f"api:{bench}-leaderboard")
    except NoReverseMatch:
        pytest.fail(f"api:{bench}-leaderboard is missing: every benchmark must serve one")


def rows_of(body: Any) -> list[dict[str, Any]]:
    """Rows of a leaderboard response: every list endpoint answers with the same envelope."""
    assert isinstance(body, dict), f"not the paginated envelope: {str(body)[:200]}"
    assert set(body) == {"count", "next", "previous", "results"}, sorted(body)
    assert isinstance(body["results"], list)
    return body["results"]


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_leaderboard_is_public_and_lists_every_entry(api, bench):
    seed_leaderboards(12)
    url = leaderboard_url(bench)
    assert url == f"/api/{bench}/leaderboard/"
    response = api.get(url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert len(rows_of(response.json())) == 12


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_leaderboard_cannot_be_written_to(api, bench):
    url = leaderboard_url(bench)
    assert api.post(url, {}, format="json").status_code in (401, 403, 405)
    api.force_authenticate(UserFactory.create())
    assert api.post(url, {}, format="json").status_code in (403, 405)


def test_probe_leaderboard_puts_missing_resilience_last(api):
    seed_leaderboards(25)  # every tenth model has no resilience index
    rows = rows_of(api.get(leaderboard_url("probes")).json())
    values = [r["resilience_index"] for r in rows]
    missing = [v is None for v in values]
    assert any(missing) and not all(missing)
    assert missing == sorted(missing), "rows without a score must come after all scored rows"
    scored = [v for v in values if v is not None]
    assert scored == sorted(scored, reverse=True)


def test_checklist_leaderboard_is_ranked_by_score(api):
    seed_leaderboards(15)
    rows = rows_of(api.get(leaderboard_url("checklist")).json())
    scores = [r["s"] for r in rows]
    assert scores == sorted(scores, reverse=True)
    assert [r["rank"] for r in rows] == list(range(1, 16))


@pytest.mark.parametrize("bench", BENCHMARKS)
def test_leaderboard_query_count_does_not_grow_with_entries(api, bench, django_assert_num_queries):
    url = leaderboard_url(bench)
    seed_leaderboards(3)
    with CaptureQueriesContext(connection) as small:
        api.get(url)
    # Read now: the query log is reset when the next request starts.
    expected = len(small.captured_queries)
    assert expected > 0
    seed_leaderboards(20, start=3)
    assert len(rows_of(api.get(url).json())) == 23
    with django_assert_num_queries(expected):
        api.get(url)
