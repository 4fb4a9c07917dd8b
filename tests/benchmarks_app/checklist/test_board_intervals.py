# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""Checklist board: the interval of S over questions, its rank range and tie marks."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks_app.models import ChecklistAssessment, ChecklistScore, EvaluationRun
from benchmarks_app.selectors.checklist import checklist_leaderboard
from benchmarks_app.services.checklist import (
    checklist_board_refresh,
    checklist_submission_assess,
    checklist_submission_create,
)
from scoring.checklist.scores import PaperAssessment, s_interval
from tests.factories.checklist import (
    ChallengeFactory,
    ChecklistSubmissionFactory,
    MembershipFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db


def test_assessed_triplet_stores_the_interval_of_s(
    demo_triplet, django_capture_on_commit_callbacks
) -> None:
    m = MembershipFactory()
    with django_capture_on_commit_callbacks(execute=True):
        sub = checklist_submission_create(team=m.team, user=m.user, files=demo_triplet)
        run = checklist_submission_assess(submission=sub, user=m.user)
    score = ChecklistScore.objects.get(run=run)
    papers: dict[str, tuple[dict, dict]] = {}
    for a in ChecklistAssessment.objects.filter(run=run).select_related(
        "answer__paper", "answer__question"
    ):
        answers, correct = papers.setdefault(a.answer.paper.kind, ({}, {}))
        answers[a.answer.question.number] = a.answer.answer
        correct[a.answer.question.number] = a.correct
    expected = s_interval(*(PaperAssessment(*papers[k]) for k in ("G", "A", "T")))
    assert score.ci == expected
    assert score.ci is not None and score.ci["metric"] == "s"
    assert (score.ci["level"], score.ci["resamples"], score.ci["seed"]) == (0.95, 2000, 0)
    assert 0 <= score.ci["low"] <= score.ci["high"] <= 1
    assert score.ci["low"] < score.ci["high"]  # 0 < S < 1 on the demo triplet: it varies


def _entry(team, s: float, low: float | None, high: float | None):  # type: ignore[no-untyped-def]
    sub = ChecklistSubmissionFactory(team=team, status="scored")
    run = EvaluationRun.objects.create(benchmark="checklist", checklist_submission=sub)
    ci = None
    if low is not None:
        ci = {"metric": "s", "low": low, "high": high, "level": 0.95, "resamples": 2000, "seed": 0}
    ChecklistScore.objects.create(
        run=run, submission=sub, c_g=0.9, c_a=1, c_t=1, r=1 - s, s=s, ci=ci
    )
    # As when the run ends: the board's rows are rewritten from the scores.
    checklist_board_refresh(challenge=team.challenge, phase=None)
    return sub


@pytest.fixture
def board():  # type: ignore[no-untyped-def]
    challenge = ChallengeFactory(slug="ci-board")
    entries = [
        ("alpha", 0.60, 0.50, 0.70),
        ("beta", 0.55, 0.45, 0.65),  # overlaps alpha
        ("gamma", 0.30, 0.25, 0.35),  # clear of both
        ("delta", 0.10, None, None),  # scored before intervals: a point
    ]
    for name, s, low, high in entries:
        _entry(TeamFactory(name=name, challenge=challenge), s, low, high)
    return challenge


def test_rank_ranges_and_ties_by_hand(board) -> None:
    rows = checklist_leaderboard(challenge_slug="ci-board")
    assert [r["team"] for r in rows] == ["alpha", "beta", "gamma", "delta"]
    assert [(r["rank_low"], r["rank_high"]) for r in rows] == [(1, 2), (1, 2), (3, 3), (4, 4)]
    assert [r["tied"] for r in rows] == [False, True, False, False]
    assert (rows[1]["ci_low"], rows[1]["ci_high"]) == (0.45, 0.65)
    assert (rows[3]["ci_low"], rows[3]["ci_high"]) == (None, None)


def test_api_page_and_cli_show_them(client, board) -> None:
    api = APIClient().get(reverse("api:checklist-leaderboard"), {"challenge": "ci-board"}).json()
    got = [(r["team"], r["s_ci"], r["rank_low"], r["rank_high"], r["tied"]) for r in api["results"]]
    assert got == [
        ("alpha", [0.5, 0.7], 1, 2, False),
        ("beta", [0.45, 0.65], 1, 2, True),
        ("gamma", [0.25, 0.35], 3, 3, False),
        ("delta", None, 4, 4, False),
    ]

    html = client.get(reverse("checklist:leaderboard"), {"challenge": "ci-board"}).content.decode()
    assert "0.450\u20130.650" in html and "1\u20132" in html and "≈ tied" in html

    out = io.StringIO()
    call_command("checklist_leaderboard", "--challenge", "ci-board", "--format", "json", stdout=out)
    rows = json.loads(out.getvalue())["rows"]
    assert [(r["team"], r["s_ci"], r["rank_low"], r["rank_high"], r["tied"]) for r in rows] == got
    out = io.StringIO()
    call_command("checklist_leaderboard", "--challenge", "ci-board", stdout=out)
    text = out.getvalue()
    assert "S [0.450, 0.650]  ranks 1-2  ~ tied with the entry above" in text
    assert "delta  S no interval  ranks 4" in text
