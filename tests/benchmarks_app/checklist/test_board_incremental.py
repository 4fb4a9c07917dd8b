# mypy: disable-error-code="arg-type,attr-defined,misc,unused-ignore,no-untyped-def,return-value"
"""Issue 25: a checklist run's end (or a choice) updates its team's row (and at most two
neighbours' ties), and the board equals, field by field, what a full rebuild
(``checklist_board_refresh``) writes; the places, ranks and rank ranges read from it (counted,
or in memory) equal ``board_ranks`` over its entries in ``board_entries``' order."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks_app.models import (
    Challenge,
    ChecklistScore,
    ChecklistSubmission,
    EvaluationRun,
    Team,
)
from benchmarks_app.models.boards import ChecklistBoardRow
from benchmarks_app.selectors.board_marks import CHECKLIST_SHAPE, own_order
from benchmarks_app.services.checklist.boards import (
    _bounds,
    _genuine_only,
    board_entries,
    checklist_board_refresh,
    checklist_board_refresh_for_run,
    checklist_board_refresh_for_submission,
)
from scoring.stats import board_ranks
from tests.benchmarks_app.board_marks_check import read_marks
from tests.factories.checklist import ChallengeFactory, ChecklistSubmissionFactory, TeamFactory
from tests.factories.phases import ChecklistPhaseFactory

pytestmark = pytest.mark.django_db

FIELDS = [
    f.attname
    for f in ChecklistBoardRow._meta.concrete_fields
    if f.attname not in ("id", "computed_at")
]
# A fixed instant, so that equal offsets give equal submission times (ties on the time).
ORIGIN = timezone.now().replace(microsecond=0)


def snapshot(challenge: Challenge) -> list[dict[str, Any]]:
    return list(
        ChecklistBoardRow.objects.filter(challenge=challenge)
        .order_by("phase_id", *own_order(CHECKLIST_SHAPE))
        .values(*FIELDS, "computed_at")
    )


def marks_match_the_definition(challenge: Challenge, phase: Any = None) -> list[tuple[Any, ...]]:
    """(team, place, rank, best, worst, tie) of every row in board order, as read, checked
    against ``board_ranks`` over ``board_entries`` (the entries a rebuild writes, in order)."""
    entries = board_entries(challenge=challenge, phase=phase)
    definition = board_ranks(
        [(e["s"], *_bounds(e)) for e in entries], exact=[_genuine_only(e) for e in entries]
    )
    rows = {
        r.team_id: r for r in ChecklistBoardRow.objects.filter(challenge=challenge, phase=phase)
    }
    read = read_marks(CHECKLIST_SHAPE, {"challenge": challenge.pk, "phase": phase})
    out = []
    for place, (entry, mark) in enumerate(zip(entries, definition, strict=True), start=1):
        row = rows[entry["submission__team_id"]]
        got = read[row.pk]
        assert (got.position, got.rank, got.rank_low, got.rank_high, row.tied) == (
            place,
            place,
            mark.rank_low,
            mark.rank_high,
            mark.tied,
        )
        out.append((row.team_id, place, got.rank, got.rank_low, got.rank_high, row.tied))
    assert len(out) == len(rows)
    return out


def marks_only(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k != "computed_at"} for row in rows]


def full_rebuild(challenge: Challenge, phase: Any = None) -> list[dict[str, Any]]:
    with transaction.atomic():
        checklist_board_refresh(challenge=challenge, phase=phase)
        rebuilt = snapshot(challenge)
        transaction.set_rollback(True)
    return marks_only(rebuilt)


def submit(team: Team, *, kind: str, seconds: int, phase: Any = None) -> ChecklistSubmission:
    sub = ChecklistSubmissionFactory(team=team, status="scored", kind=kind, phase=phase)
    ChecklistSubmission.objects.filter(pk=sub.pk).update(
        created_at=ORIGIN - timedelta(seconds=seconds)
    )
    sub.refresh_from_db()
    return sub


def score(sub: ChecklistSubmission, s: float, c_g: float, half: float | None) -> EvaluationRun:
    """A run of ``sub`` that ended with a new score (re-assessments append scores)."""
    run = EvaluationRun.objects.create(
        benchmark="checklist", checklist_submission=sub, phase_id=sub.phase_id
    )
    ci = None
    if half is not None:
        ci = {"metric": "s", "low": max(0.0, s - half), "high": min(1.0, s + half)}
    ChecklistScore.objects.create(
        run=run, submission=sub, c_g=c_g, c_a=0.5, c_t=0.5, r=1 - s, s=s, ci=ci
    )
    return run


# Few distinct values: equal scores, equal intervals, overlaps and S = 0 entries of the
# genuine paper alone (exact by definition) are common.
steps_strategy = st.lists(
    st.tuples(
        st.integers(0, 5),  # which team
        st.integers(0, 2),  # 0: a new submission; else a re-score / choice of an earlier one
        st.sampled_from(["G", "GAT"]),
        st.sampled_from([0.0, 0.25, 0.5, 0.75]),  # S
        st.sampled_from([0.1, 0.5, 0.9]),  # C_G
        st.none() | st.sampled_from([0.0, 0.1, 0.3]),  # interval half-width
        st.sampled_from([0, 60, 120]),  # submitted that many seconds before ORIGIN
        st.booleans(),  # choose that submission afterwards
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=steps_strategy)
def test_run_ends_give_the_board_a_full_rebuild_gives(steps: list[tuple[Any, ...]]) -> None:
    with transaction.atomic():
        challenge = ChallengeFactory(slug="incremental")
        phase = ChecklistPhaseFactory(challenge=challenge, slug="dev")
        teams = [
            TeamFactory(challenge=challenge, name=f"team {i}", is_internal=i == 5) for i in range(6)
        ]
        subs: dict[int, list[ChecklistSubmission]] = {}
        for who, which, kind, s, c_g, half, seconds, choose in steps:
            mine = subs.setdefault(who, [])
            # Team 4 plays on the phase's board: the board without phase never moves for it.
            board_phase = phase if who == 4 else None
            if which == 0 or not mine:
                mine.append(submit(teams[who], kind=kind, seconds=seconds, phase=board_phase))
            sub = mine[(len(mine) - 1) if which == 0 else which % len(mine)]
            before = {(r["phase_id"], r["team_id"]): r for r in snapshot(challenge)}
            written = checklist_board_refresh_for_run(run=score(sub, s, c_g, half))
            if choose:
                ChecklistSubmission.objects.filter(team=teams[who], phase=board_phase).update(
                    board_choice=False
                )
                ChecklistSubmission.objects.filter(pk=sub.pk).update(board_choice=True)
                sub.refresh_from_db()
                written += checklist_board_refresh_for_submission(submission=sub)
            after = snapshot(challenge)
            # Both boards, the phase's and the one without phases.
            expected = full_rebuild(challenge, phase) if board_phase else full_rebuild(challenge)
            assert marks_only(after) == expected
            marks_match_the_definition(challenge, board_phase)
            # Only the team's row and at most two others' ties were written; the other
            # board was not touched at all.
            rewritten = 0
            for row in after:
                old = before.get((row["phase_id"], row["team_id"]))
                if old is None:
                    continue
                if row["phase_id"] != sub.phase_id:
                    assert old == row
                elif row["team_id"] != teams[who].pk and old != row:
                    assert {f for f in FIELDS if old[f] != row[f]} == {"tied"}
                    rewritten += 1
            assert rewritten <= min(written, 4)
            assert not any(r["team_id"] == teams[5].pk for r in after)
        transaction.set_rollback(True)


def test_a_new_top_entry_moves_the_others_without_writing_them() -> None:
    challenge = ChallengeFactory(slug="shift")
    teams = [TeamFactory(challenge=challenge, name=f"t{i}") for i in range(6)]
    for i, team in enumerate(teams[:5]):
        run = score(submit(team, kind="GAT", seconds=i), 0.1 + 0.1 * i, 0.5, 0.01)
        checklist_board_refresh_for_run(run=run)
    before = snapshot(challenge)
    assert [r["team_id"] for r in before] == [t.pk for t in reversed(teams[:5])]
    with CaptureQueriesContext(connection) as queries:
        written = checklist_board_refresh_for_run(
            run=score(submit(teams[5], kind="GAT", seconds=9), 0.9, 0.5, 0.01)
        )
    after = snapshot(challenge)
    assert marks_only(after) == full_rebuild(challenge)
    marks = marks_match_the_definition(challenge)
    assert marks[0][:2] == (teams[5].pk, 1)
    assert [(team, place) for team, place, *_ in marks[1:]] == [
        (t.pk, place) for place, t in enumerate(reversed(teams[:5]), start=2)
    ]
    # Every other row moved one place down (and its rank range with it), yet only the new
    # row was written: places and ranks are counted when read. No row was deleted either.
    assert written == 1
    assert [r for r in after[1:]] == [r for r in before]
    assert not [q for q in queries.captured_queries if q["sql"].upper().startswith("DELETE")]
    # A re-score that changes nothing for the others writes the team's row only.
    again = checklist_board_refresh_for_run(
        run=score(submit(teams[0], kind="GAT", seconds=0), 0.1, 0.5, 0.01)
    )
    assert again == 1
    assert marks_only(snapshot(challenge)) == full_rebuild(challenge)


def test_an_entry_against_genuine_only_entries_is_ranked_as_a_rebuild_ranks_it() -> None:
    # Against an entry of the genuine paper alone (S = 0 exactly) a row counts by its value,
    # not its interval: an interval reaching 0 does not let the genuine entry beat it.
    challenge = ChallengeFactory(slug="exact")
    genuine, genuine2, triplet = (
        TeamFactory(challenge=challenge, name=n) for n in ("genuine", "genuine2", "triplet")
    )
    checklist_board_refresh_for_run(run=score(submit(genuine, kind="G", seconds=5), 0.0, 0.9, 0))
    checklist_board_refresh_for_run(run=score(submit(genuine2, kind="G", seconds=4), 0.0, 0.8, 0))
    checklist_board_refresh_for_run(
        run=score(submit(triplet, kind="GAT", seconds=3), 0.05, 0.5, 0.1)
    )
    assert marks_only(snapshot(challenge)) == full_rebuild(challenge)
    assert [
        (team, low, high, tied)
        for team, _, _, low, high, tied in marks_match_the_definition(challenge)
    ] == [
        (triplet.pk, 1, 1, False),
        (genuine.pk, 2, 3, False),
        (genuine2.pk, 2, 3, True),
    ]
