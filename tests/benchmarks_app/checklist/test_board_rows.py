# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore,no-untyped-def"
"""Checklist board rows: written per team and phase, read in one query, paged in SQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks_app.models import ChecklistScore, ChecklistSubmission, EvaluationRun
from benchmarks_app.models.boards import ChecklistBoardRow
from benchmarks_app.selectors.board_marks import CHECKLIST_SHAPE, attach_marks, own_order
from benchmarks_app.selectors.checklist import checklist_leaderboard
from benchmarks_app.services.checklist import (
    checklist_board_refresh,
    checklist_board_refresh_for_run,
    checklist_boards_refresh_all,
    team_flags_set,
)
from tests.factories.checklist import ChallengeFactory, ChecklistSubmissionFactory, TeamFactory
from tests.factories.phases import ChecklistPhaseFactory

pytestmark = pytest.mark.django_db


def scored(team, s: float, c_g: float = 0.5, *, phase=None, minutes: int = 0, **fields):
    """A scored submission of ``team`` (no board refresh: callers decide when)."""
    sub = ChecklistSubmissionFactory(team=team, status="scored", phase=phase, **fields)
    ChecklistSubmission.objects.filter(pk=sub.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes)
    )
    sub.refresh_from_db()
    run = EvaluationRun.objects.create(benchmark="checklist", checklist_submission=sub, phase=phase)
    ChecklistScore.objects.create(run=run, submission=sub, c_g=c_g, c_a=1, c_t=1, r=1 - s, s=s)
    return sub, run


def test_one_row_per_team_best_entry_ranked_like_before() -> None:
    challenge = ChallengeFactory(slug="rows")
    a, b, c = (TeamFactory(name=n, challenge=challenge) for n in ("alpha", "beta", "gamma"))
    scored(a, 0.5, 0.6)
    best_a, _ = scored(a, 0.7, 0.6)
    scored(b, 0.7, 0.9)  # same S, higher C_G: first
    early, _ = scored(c, 0.7, 0.6, minutes=30)  # same S and C_G, earlier: before alpha
    assert checklist_board_refresh(challenge=challenge, phase=None) == 3
    rows = attach_marks(
        CHECKLIST_SHAPE,
        # The board's whole order: gamma and alpha share S and C_G (the earlier entry first).
        list(
            ChecklistBoardRow.objects.filter(challenge=challenge).order_by(
                *own_order(CHECKLIST_SHAPE)
            )
        ),
    )
    assert [(r.team.name, r.position, r.rank) for r in rows] == [
        ("beta", 1, 1),
        ("gamma", 2, 2),
        ("alpha", 3, 3),
    ]
    assert rows[2].submission_id == best_a.pk and rows[1].submission_id == early.pk
    # A refresh rewrites the board; it never adds a second row per team.
    assert checklist_board_refresh(challenge=challenge, phase=None) == 3
    assert ChecklistBoardRow.objects.filter(challenge=challenge).count() == 3


def test_run_end_refreshes_only_its_phase_board() -> None:
    challenge = ChallengeFactory(slug="per-phase")
    dev = ChecklistPhaseFactory(challenge=challenge, slug="dev")
    team = TeamFactory(challenge=challenge, name="solo")
    _, run = scored(team, 0.4, phase=dev)
    assert checklist_board_refresh_for_run(run=run) == 1
    row = ChecklistBoardRow.objects.get()
    assert row.phase_id == dev.pk and row.s == 0.4
    # The board without phases is another board: nothing there.
    assert checklist_leaderboard(challenge_slug="per-phase", phase="none") == []
    assert [r["team"] for r in checklist_leaderboard(challenge_slug="per-phase")] == ["solo"]


def test_internal_teams_stay_off_and_baselines_carry_the_flag() -> None:
    challenge = ChallengeFactory(slug="flags")
    ours = TeamFactory(challenge=challenge, name="maintainers")
    ref = TeamFactory(challenge=challenge, name="reference")
    scored(ours, 0.9)
    scored(ref, 0.2, method_name="Template answers", method_url="https://example.org/ref")
    checklist_board_refresh(challenge=challenge, phase=None)
    team_flags_set(team=ours, is_internal=True)
    team_flags_set(team=ref, is_baseline=True)
    rows = checklist_leaderboard(challenge_slug="flags")
    assert [(r["team"], r["rank"], r["is_baseline"]) for r in rows] == [("reference", 1, True)]
    assert (rows[0]["method_name"], rows[0]["method_url"]) == (
        "Template answers",
        "https://example.org/ref",
    )
    team_flags_set(team=ours, is_internal=False)
    assert [r["team"] for r in checklist_leaderboard(challenge_slug="flags")] == [
        "maintainers",
        "reference",
    ]


def test_refresh_all_rebuilds_boards_from_scores() -> None:
    challenge = ChallengeFactory(slug="upgrade")
    phase = ChecklistPhaseFactory(challenge=challenge)
    scored(TeamFactory(challenge=challenge), 0.3)
    scored(TeamFactory(challenge=challenge), 0.6, phase=phase)
    assert not ChecklistBoardRow.objects.exists()  # scores written before rows existed
    assert checklist_boards_refresh_all() == 2
    assert set(ChecklistBoardRow.objects.values_list("phase_id", "s")) == {
        (None, 0.3),
        (phase.pk, 0.6),
    }


def _seed(challenge, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        scored(TeamFactory(challenge=challenge, name=f"t{i:03d}"), (i % 17) / 17, 0.5)
    checklist_board_refresh(challenge=challenge, phase=None)


def test_api_pages_in_sql_with_constant_queries() -> None:
    challenge = ChallengeFactory(slug="paged")
    api = APIClient()
    url = reverse("api:checklist-leaderboard")
    _seed(challenge, 4)
    with CaptureQueriesContext(connection) as small:
        api.get(url, {"challenge": "paged", "page_size": 2})
    _seed(challenge, 40, start=4)
    with CaptureQueriesContext(connection) as large:
        body = api.get(url, {"challenge": "paged", "page_size": 2, "page": 3}).json()
    assert len(small.captured_queries) == len(large.captured_queries)
    page_sql = [q["sql"] for q in large.captured_queries if "checklistboardrow" in q["sql"]]
    # The board's stored size (issue 38), the page's ids with LIMIT/OFFSET, those rows, then
    # their places and ranks (counts over the board's indexes and stored buckets around the
    # page's rows): never the whole board.
    assert any("boardsize" in q["sql"] for q in large.captured_queries)
    assert len(page_sql) == 3
    assert "LIMIT 2 OFFSET 4" in page_sql[0] and " IN (" in page_sql[1]
    assert page_sql[2].startswith("SELECT (SELECT") and "boardbucket" in page_sql[2]
    assert body["count"] == 44 and [r["rank"] for r in body["results"]] == [5, 6]
    ordered = api.get(url, {"challenge": "paged", "ordering": "-team", "page_size": 3}).json()
    assert [r["team"] for r in ordered["results"]] == ["t043", "t042", "t041"]
    by_s = api.get(url, {"challenge": "paged", "ordering": "s", "page_size": 500}).json()
    values = [r["s"] for r in by_s["results"]]
    assert values == sorted(values)
    bad = api.get(url, {"challenge": "paged", "ordering": "secret"})
    assert bad.status_code == 400 and "secret" in bad.json()["errors"][0]["reason"]


def test_api_unknown_phase_is_a_400_naming_the_phases() -> None:
    challenge = ChallengeFactory(slug="named")
    ChecklistPhaseFactory(challenge=challenge, slug="dev")
    response = APIClient().get(
        reverse("api:checklist-leaderboard"), {"challenge": "named", "phase": "final"}
    )
    assert response.status_code == 400
    text = str(response.json())
    assert "phase" in text and "'final'" in text and "dev" in text
