"""Checklist boards: one ``ChecklistBoardRow`` per team and (challenge, phase), rebuilt on change.

A team's entry on a board is the submission it chose (``board_choice``) when that one has a
score; otherwise its best, as before choices existed: the highest S, then C_G, then the
earlier submission. A submission's score is its latest (re-assessments append scores).
Internal teams never reach a board; baseline teams are ranked like any team and carry the
flag. Rows of hidden phases are written too: who may read them is decided when reading.

A full rebuild (:func:`checklist_board_refresh`) rewrites the whole board in one transaction
with the challenge row locked. A run's end, a choice or a withdrawal changes one team's entry
only: :func:`checklist_board_update` rebuilds that team's row from its scores and the ties
of the rows next to where it was and is now; places, ranks and rank ranges are counted when
the board is read (:mod:`benchmarks_app.selectors.board_marks`). A property test compares the
two with a rebuild. The challenge row is locked meanwhile too, so two runs ending at once
update the board one after the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils.dateparse import parse_datetime

from benchmarks_app.models import (
    Benchmark,
    Challenge,
    ChecklistScore,
    ChecklistSubmission,
    EvaluationRun,
    SubmissionKind,
    Team,
)
from benchmarks_app.models.boards import ChecklistBoardRow, checklist_board_sort_fields
from benchmarks_app.models.phases import Phase
from benchmarks_app.selectors.board_marks import CHECKLIST_SHAPE, key_of, ties_all
from benchmarks_app.services.board_ties import board_row_delete, board_row_save
from scoring.checklist.scores import CI_METRIC

_SCORE_FIELDS = (
    "pk",
    "run_id",
    "submission_id",
    "c_g",
    "c_a",
    "c_t",
    "r",
    "s",
    "ci",
    "submission__team_id",
    "submission__team__name",
    "submission__team__is_baseline",
    "submission__kind",
    "submission__created_at",
    "submission__board_choice",
    "submission__method_name",
    "submission__method_description",
    "submission__method_url",
)


def _ci_bounds(ci: Any) -> tuple[float | None, float | None]:
    ci = ci or {}
    if ci.get("metric") != CI_METRIC:
        return None, None
    return ci.get("low"), ci.get("high")


def _order_key(entry: dict[str, Any]) -> tuple[float, float, float, int]:
    return (
        -entry["s"],
        -entry["c_g"],
        entry["submission__created_at"].timestamp(),
        entry["submission_id"],
    )


def board_entries(
    *, challenge: Challenge, phase: Phase | None, team_id: int | None = None
) -> list[dict[str, Any]]:
    """Each non-internal team's entry on the board, best first (one query); with
    ``team_id``, that team's alone (none for an internal team)."""
    scores = ChecklistScore.objects.filter(
        submission__challenge=challenge,
        submission__phase=phase,
        submission__team__is_internal=False,
    )
    if team_id is not None:
        scores = scores.filter(submission__team_id=team_id)
    scores = scores.order_by("created_at", "pk").values(*_SCORE_FIELDS)
    latest: dict[int, dict[str, Any]] = {}
    for score in scores:
        latest[score["submission_id"]] = score  # later scores replace earlier ones
    best: dict[int, dict[str, Any]] = {}
    chosen: dict[int, dict[str, Any]] = {}
    for entry in latest.values():
        team_id = entry["submission__team_id"]
        if entry["submission__board_choice"]:
            # One choice per team and phase is kept by the service; should two slip in,
            # the later submission is the team's latest word.
            kept = chosen.get(team_id)
            if kept is None or entry["submission_id"] > kept["submission_id"]:
                chosen[team_id] = entry
        if team_id not in best or _order_key(entry) < _order_key(best[team_id]):
            best[team_id] = entry
    best.update(chosen)
    return sorted(best.values(), key=_order_key)


def _genuine_only(entry: dict[str, Any]) -> bool:
    # S of an entry of the genuine paper alone is 0 by definition, not an estimate: it has
    # no interval, ranks below every entry with S > 0 and is tied with none of them.
    return entry["submission__kind"] == SubmissionKind.GENUINE_ONLY and entry["s"] == 0


def _bounds(entry: dict[str, Any]) -> tuple[float | None, float | None]:
    return (None, None) if _genuine_only(entry) else _ci_bounds(entry["ci"])


def _row(challenge: Challenge, phase: Phase | None, e: dict[str, Any]) -> ChecklistBoardRow:
    """A team's row from its entry (its tie left unset)."""
    low, high = _bounds(e)
    return ChecklistBoardRow(
        challenge=challenge,
        phase=phase,
        team_id=e["submission__team_id"],
        team_sort=e["submission__team__name"].casefold(),
        submission_id=e["submission_id"],
        run_id=e["run_id"],
        score_id=e["pk"],
        kind=e["submission__kind"],
        c_g=e["c_g"],
        c_a=e["c_a"],
        c_t=e["c_t"],
        r=e["r"],
        s=e["s"],
        submitted_at=e["submission__created_at"],
        ci_low=low,
        ci_high=high,
        is_baseline=e["submission__team__is_baseline"],
        method_name=e["submission__method_name"],
        method_description=e["submission__method_description"],
        method_url=e["submission__method_url"],
        **checklist_board_sort_fields(
            s=e["s"],
            c_g=e["c_g"],
            submitted_micros=_micros(e["submission__created_at"]),
            genuine_only=_genuine_only(e),
            ci_low=low,
            ci_high=high,
        ),
    )


@transaction.atomic
def checklist_board_refresh(*, challenge: Challenge, phase: Phase | None) -> int:
    """Rewrite the board of ``challenge`` in ``phase`` (None: the board without phases).

    Returns the number of rows written.
    """
    Challenge.objects.select_for_update(no_key=True).filter(pk=challenge.pk).first()
    entries = board_entries(challenge=challenge, phase=phase)
    ChecklistBoardRow.objects.on_phase(phase).filter(challenge=challenge).delete()
    rows = [_row(challenge, phase, e) for e in entries]
    ties_all(CHECKLIST_SHAPE, rows)
    ChecklistBoardRow.objects.bulk_create(rows, batch_size=500)
    return len(rows)


_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


def _micros(value: datetime | str) -> int:
    """Microseconds since the epoch (UTC) of a stored datetime: the rebuild's order by
    ``created_at.timestamp()``, compared exactly."""
    if isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is None:
            raise ValueError(f"submitted_at: not a datetime: {value!r}")
        value = parsed
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return (value - _EPOCH) // _MICROSECOND


@transaction.atomic
def checklist_board_update(*, challenge: Challenge, phase: Phase | None, team_id: int) -> int:
    """Bring one team's row of a board up to date with its scores, and the ties next to
    where it was and is now; the number of rows written.

    Places, ranks and rank ranges are counted when the board is read
    (:mod:`benchmarks_app.selectors.board_marks`). Gives what :func:`checklist_board_refresh`
    of that board gives (a property test compares them).
    """
    Challenge.objects.select_for_update(no_key=True).filter(pk=challenge.pk).first()
    entries = board_entries(challenge=challenge, phase=phase, team_id=team_id)
    board = ChecklistBoardRow.objects.on_phase(phase).filter(challenge=challenge)
    previous = board.filter(team_id=team_id).first()
    if entries:
        row = _row(challenge, phase, entries[0])
        row.pk = previous.pk if previous is not None else None
        old_key = key_of(CHECKLIST_SHAPE, previous) if previous is not None else None
        return board_row_save(shape=CHECKLIST_SHAPE, row=row, old_key=old_key)
    if previous is not None:
        return board_row_delete(shape=CHECKLIST_SHAPE, row=previous)
    return 0


def checklist_board_refresh_for_run(*, run: EvaluationRun) -> int:
    """Update the board a checklist run's submission is on (called whenever a run ends): its
    team's row and the rows that move. Returns the number of rows written."""
    if run.benchmark != Benchmark.CHECKLIST or run.checklist_submission_id is None:
        return 0
    submission = (
        ChecklistSubmission.objects.select_related("challenge", "phase")
        .filter(pk=run.checklist_submission_id)
        .first()
    )
    if submission is None:
        return 0
    return checklist_board_update(
        challenge=submission.challenge, phase=submission.phase, team_id=submission.team_id
    )


def checklist_board_refresh_for_submission(*, submission: ChecklistSubmission) -> int:
    """Update the board ``submission`` belongs to after its choice or withdrawal (only its
    team's entry can change). Returns the number of rows written."""
    phase = Phase.objects.filter(pk=submission.phase_id).first() if submission.phase_id else None
    challenge = Challenge.objects.get(pk=submission.challenge_id)
    return checklist_board_update(challenge=challenge, phase=phase, team_id=submission.team_id)


def _refresh_boards(pairs: Iterable[tuple[int, int | None]]) -> int:
    pairs = set(pairs)
    challenges = Challenge.objects.in_bulk({c for c, _ in pairs})
    phases = Phase.objects.in_bulk({p for _, p in pairs if p is not None})
    for challenge_id, phase_id in sorted(pairs, key=lambda p: (p[0], p[1] or 0)):
        checklist_board_refresh(
            challenge=challenges[challenge_id],
            phase=phases[phase_id] if phase_id is not None else None,
        )
    return len(pairs)


def checklist_boards_refresh_for_team(*, team: Team) -> int:
    """Rewrite every board the team has a scored entry on, or a row on (after its
    ``is_internal`` or ``is_baseline`` changed). Returns the number of boards rewritten."""
    pairs = set(
        ChecklistScore.objects.filter(submission__team=team).values_list(
            "submission__challenge_id", "submission__phase_id"
        )
    )
    pairs |= set(
        ChecklistBoardRow.objects.filter(team=team).values_list("challenge_id", "phase_id")
    )
    return _refresh_boards(pairs)


def checklist_boards_refresh_all() -> int:
    """Rewrite every board that has a score (after an upgrade, or a change of how boards are
    computed). Returns the number of boards rewritten."""
    pairs = set(
        ChecklistScore.objects.values_list("submission__challenge_id", "submission__phase_id")
    )
    pairs |= set(ChecklistBoardRow.objects.values_list("challenge_id", "phase_id"))
    return _refresh_boards(pairs)
