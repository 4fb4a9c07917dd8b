# mypy: disable-error-code="arg-type,attr-defined,misc,union-attr,unused-ignore"
"""Checklist vote policies end to end (issue 24, item 6): a run under ``two`` keeps every
vote; ``checklist_votes`` reads them and says what ``adaptive`` would have asked and where its
outcome differs; an ``adaptive`` run asks exactly that, and its page says so."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

from benchmarks_app.models import ChecklistAssessment, RunStatus
from benchmarks_app.services.checklist import checklist_submission_assess
from tests.factories.checklist import MembershipFactory, PaperFactory, add_answers
from tests.scoring.judges.fake_openai import FakeOpenAI, completion

pytestmark = pytest.mark.django_db


def scripted(body: dict[str, Any]) -> dict[str, Any]:
    """Q1: an unsure first vote, overturned; Q2: a sure first vote, outvoted; others agree."""
    number = int(re.search(r"<question>\n(\d+)\.", body["messages"][1]["content"]).group(1))
    vote = int(body["seed"])  # JUDGE_SEED 0 + vote number
    verdict = {"correct": True, "feedback": "The paper reports it in Section 3."}
    if number == 1 and vote == 1:
        verdict["feedback"] = "It is unclear whether the claims match the results."
    elif number in (1, 2) and vote > 1:
        verdict = {"correct": False, "feedback": "The paper does not support the answer."}
    return completion(json.dumps(verdict))


def _assess(paper: Any, server: FakeOpenAI, capture: Any, policy: str) -> Any:
    with (
        override_settings(OPENAI_BASE_URL=server.base_url, CHECKLIST_VOTES=policy, JUDGE_SEED=0),
        capture(execute=True),
    ):
        run = checklist_submission_assess(submission=paper.submission, judge="openai:m1")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    return run


def _outcomes(run: Any) -> dict[int, int]:
    rows = ChecklistAssessment.objects.filter(run=run)
    return dict(rows.values_list("answer__question__number", "correct"))


def test_recorded_votes_measure_both_policies_and_adaptive_asks_what_they_say(
    client: Any, django_capture_on_commit_callbacks: Any
) -> None:
    m = MembershipFactory()
    first = PaperFactory(submission__team=m.team)
    add_answers(first, {n: "Yes" for n in range(1, 16)})
    with FakeOpenAI(scripted) as server:
        two = _assess(first, server, django_capture_on_commit_callbacks, "two")
        assert len(server.requests) == 3 + 3 + 13 * 2

        out = io.StringIO()
        call_command("checklist_votes", "--run", str(two.pk), stdout=out)
        text = out.getvalue()
        assert "two (always two, a third on disagreement): 32 votes" in text
        assert "17 votes (1.13 an answer, 15 fewer); 1 answer(s) asked again" in text
        assert "same outcome under both: 14 of 15 (93.3%)" in text

        second = PaperFactory(submission__team=m.team)
        add_answers(second, {n: "Yes" for n in range(1, 16)})
        server.requests.clear()
        adaptive = _assess(second, server, django_capture_on_commit_callbacks, "adaptive")
    # The same paper text and questions: every answer is already cached, none is asked anew;
    # the votes the adaptive run took are those the comparison counted.
    assert server.requests == []
    votes = ChecklistAssessment.objects.filter(run=adaptive).values_list("votes", flat=True)
    assert sum(len(v) for v in votes) == 17
    # Only Q2 differs: its sure first vote decides alone where two more outvoted it.
    differ = {n for n, c in _outcomes(adaptive).items() if _outcomes(two)[n] != c}
    assert differ == {2}
    unsure = [v[0]["unsure"] for v in votes if len(v) > 1]
    assert unsure == ["feedback says 'unclear'"]

    client.force_login(m.user)
    page = client.get(f"/runs/{adaptive.pk}/").content.decode()
    assert "adaptive (CHECKLIST_VOTES: one vote; another only where the first failed" in page
    assert "17 votes for 15 answers, 1 asked again; always two would ask at least 30" in page
    votes = client.get(f"/api/runs/{adaptive.pk}/").json()["checklist_votes"]
    assert (votes["policy"], votes["votes"], votes["asked_again"]) == ("adaptive", 17, 1)


def test_checklist_votes_says_when_nothing_can_be_compared() -> None:
    out = io.StringIO()
    call_command("checklist_votes", stdout=out)
    assert "assess with CHECKLIST_VOTES=two first" in out.getvalue()
