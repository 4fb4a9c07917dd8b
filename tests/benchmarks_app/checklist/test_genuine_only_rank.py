# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore"
"""An entry of the genuine paper alone has S = 0 by definition: no interval, ranked below
every entry with S > 0 and tied with none of them (issue 26, item 9)."""

from __future__ import annotations

import pytest

from benchmarks_app.models import ChecklistScore, EvaluationRun
from benchmarks_app.models.boards import ChecklistBoardRow
from benchmarks_app.selectors.board_marks import CHECKLIST_SHAPE, attach_marks
from benchmarks_app.services.checklist import checklist_board_refresh
from scoring.stats import board_ranks
from tests.factories.checklist import ChallengeFactory, ChecklistSubmissionFactory, TeamFactory

pytestmark = pytest.mark.django_db


def _score(team, *, kind: str, s: float, c_g: float, ci):  # type: ignore[no-untyped-def]
    sub = ChecklistSubmissionFactory(team=team, status="scored", kind=kind)
    run = EvaluationRun.objects.create(benchmark="checklist", checklist_submission=sub)
    ChecklistScore.objects.create(
        run=run, submission=sub, c_g=c_g, c_a=0, c_t=0, r=1 - s, s=s, ci=ci
    )


def _ci(low: float, high: float) -> dict:
    return {"metric": "s", "low": low, "high": high, "level": 0.95, "resamples": 2000, "seed": 0}


def test_genuine_only_entry_is_below_an_uncertain_positive_s_and_not_tied() -> None:
    challenge = ChallengeFactory(slug="g-only")
    _score(
        TeamFactory(name="triplet", challenge=challenge),
        kind="GAT",
        s=0.044,
        c_g=0.5,
        ci=_ci(0.0, 0.12),
    )
    _score(
        TeamFactory(name="genuine", challenge=challenge),
        kind="G",
        s=0.0,
        c_g=0.95,
        ci=_ci(0.0, 0.0),
    )
    _score(
        TeamFactory(name="genuine2", challenge=challenge),
        kind="G",
        s=0.0,
        c_g=0.90,
        ci=_ci(0.0, 0.0),
    )
    checklist_board_refresh(challenge=challenge, phase=None)
    stored = ChecklistBoardRow.objects.filter(challenge=challenge).select_related("team")
    rows = {r.team.name: r for r in attach_marks(CHECKLIST_SHAPE, list(stored))}
    top, g1, g2 = rows["triplet"], rows["genuine"], rows["genuine2"]
    assert (top.rank, top.rank_low, top.rank_high, top.tied) == (1, 1, 1, False)
    assert (g1.rank, g1.rank_low, g1.rank_high, g1.tied) == (2, 2, 3, False)
    # Two entries with S = 0 by definition are exactly equal.
    assert (g2.rank_low, g2.rank_high, g2.tied) == (2, 3, True)
    # No interval on S for them.
    assert (g1.ci_low, g1.ci_high) == (None, None)
    assert (top.ci_low, top.ci_high) == (0.0, 0.12)


def test_board_ranks_with_exact_rows() -> None:
    rows = [(0.5, 0.3, 0.7), (0.4, 0.2, 0.6), (0.0, None, None), (0.0, None, None)]
    marks = board_ranks(rows, exact=[False, False, True, True])
    assert [(m.rank_low, m.rank_high, m.tied) for m in marks] == [
        (1, 2, False),
        (1, 2, True),
        (3, 4, False),
        (3, 4, True),
    ]
    # An uncertain row at S = 0 itself may tie an exact 0.
    marks = board_ranks([(0.0, 0.0, 0.1), (0.0, None, None)], exact=[False, True])
    assert [(m.rank_low, m.rank_high, m.tied) for m in marks] == [(1, 2, False), (1, 2, True)]
    # Without exact rows, the intervals decide as before.
    plain = board_ranks([(0.044, 0.0, 0.12), (0.0, 0.0, 0.0)])
    assert [(m.rank_low, m.rank_high, m.tied) for m in plain] == [(1, 2, False), (1, 2, True)]
