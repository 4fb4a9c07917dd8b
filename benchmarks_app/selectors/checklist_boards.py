"""Checklist boards as stored rows: which board a request means, and who sees which rows.

A board is one (challenge, phase) pair; its rows are written when a run ends or a choice
changes (:mod:`benchmarks_app.services.checklist.boards`), so reading a page is one query on
the row table whatever the number of teams. A hidden phase's board is staff-only until it is
revealed: meanwhile a participant sees only their own team's row (its score, not its place)
and everybody else sees none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from benchmarks_app.models import Challenge, Membership
from benchmarks_app.models.boards import ChecklistBoardRow
from benchmarks_app.models.phases import Phase
from benchmarks_app.selectors.board_marks import CHECKLIST_SHAPE, own_order
from benchmarks_app.selectors.board_ordering import Ordered
from benchmarks_app.selectors.phases import phase_board_public, phase_board_visible

# ``?phase=none``: the board of entries made before the challenge had phases.
PHASELESS = "none"

# The API's ``ordering`` fields and the columns they sort (ties: the board's own order).
ORDERING_COLUMNS: dict[str, Any] = {
    "rank": Ordered(CHECKLIST_SHAPE.order[:-1]),
    "team": "team_sort",
    "s": "s",
    "c_g": "c_g",
    "c_a": "c_a",
    "c_t": "c_t",
    "r": "r",
    "created_at": "submitted_at",
}


class ChecklistBoardNotFound(LookupError):
    """No such phase in the challenge; the message is ``"field: problem"``."""


@dataclass
class ChecklistBoard:
    """The board asked for and what the viewer may see of it."""

    challenge: Challenge | None
    phase: Phase | None
    phases: list[Phase] = field(default_factory=list)
    # True: every row; False: only ``own_team_id``'s row (or none), without its place.
    full: bool = True
    own_team_id: int | None = None

    @property
    def hidden(self) -> bool:
        """The board is hidden from the public (staff and the team's own row excepted)."""
        return not phase_board_public(self.phase)

    @property
    def hidden_message(self) -> str:
        if not self.hidden or self.phase is None:
            return ""
        return (
            f"The board of the {self.phase.name} phase is hidden until the organizers reveal "
            "it; meanwhile each team sees only its own score."
        )

    def rows(self) -> QuerySet[ChecklistBoardRow]:
        """The rows the viewer may see, in board order (not evaluated: slice it for a page)."""
        if self.challenge is None:
            return ChecklistBoardRow.objects.none()
        qs = ChecklistBoardRow.objects.on_phase(self.phase).filter(challenge=self.challenge)
        if not self.full:
            if self.own_team_id is None:
                return ChecklistBoardRow.objects.none()
            qs = qs.filter(team_id=self.own_team_id)
        return qs.select_related("team").order_by(*own_order(CHECKLIST_SHAPE))


def challenge_phases(challenge: Challenge) -> list[Phase]:
    """The challenge's phases, earliest first (the tabs of its board)."""
    return list(Phase.objects.filter(challenge=challenge).order_by("starts_at", "pk"))


def default_phase(phases: list[Phase], now: Any = None) -> Phase | None:
    """The phase shown without a choice: the open one (the latest started when several are),
    else the last one that started, else the first to come; None without phases."""
    if not phases:
        return None
    now = now or timezone.now()
    started = [p for p in phases if p.starts_at <= now]
    open_now = [p for p in started if p.is_open(now)]
    if open_now:
        return max(open_now, key=lambda p: (p.starts_at, p.pk))
    if started:
        return max(started, key=lambda p: (p.starts_at, p.pk))
    return phases[0]


def _pick_phase(
    challenge: Challenge, phases: list[Phase], phase: Phase | str | None
) -> Phase | None:
    if isinstance(phase, Phase):
        if phase.challenge_id != challenge.pk:
            raise ChecklistBoardNotFound(f"phase: {phase} is not a phase of {challenge.name}")
        return phase
    if phase == PHASELESS:
        return None
    if not phase:
        return default_phase(phases)
    for candidate in phases:
        if candidate.slug == phase:
            return candidate
    known = ", ".join(p.slug for p in phases) or "none (the challenge has no phases)"
    raise ChecklistBoardNotFound(f"phase: {challenge.name} has no phase {phase!r}; phases: {known}")


def checklist_board(
    *, challenge: Challenge | None, phase: Phase | str | None = None, user: Any = None
) -> ChecklistBoard:
    """The board of ``challenge`` in ``phase`` as ``user`` may see it.

    ``phase`` is a Phase, a phase slug, :data:`PHASELESS` for the entries made before the
    challenge had phases, or None for the default phase (:func:`default_phase`). Raises
    :class:`ChecklistBoardNotFound` for a slug the challenge has no phase of.
    """
    if challenge is None:
        return ChecklistBoard(challenge=None, phase=None)
    phases = challenge_phases(challenge)
    chosen = _pick_phase(challenge, phases, phase)
    board = ChecklistBoard(challenge=challenge, phase=chosen, phases=phases)
    if not phase_board_visible(chosen, user):
        board.full = False
        if user is not None and user.is_authenticated:
            board.own_team_id = (
                Membership.objects.filter(user=user, challenge=challenge)
                .values_list("team_id", flat=True)
                .first()
            )
    return board


def board_row_dict(row: ChecklistBoardRow, *, board: ChecklistBoard) -> dict[str, Any]:
    """A stored row as the leaderboard's row dict (keys as before rows were stored)."""
    placed = board.full
    return {
        # A hidden board shows a team its score, not its place among the others.
        "rank": row.position if placed else None,
        "team": row.team.name,
        "team_id": row.team_id,
        "challenge": board.challenge.slug if board.challenge else "",
        "phase": board.phase.slug if board.phase else None,
        "submission": row.submission_id,
        "kind": row.kind,
        "c_g": row.c_g,
        "c_a": row.c_a,
        "c_t": row.c_t,
        "r": row.r,
        "s": row.s,
        "ci_low": row.ci_low,
        "ci_high": row.ci_high,
        "rank_low": row.rank_low if placed else None,
        "rank_high": row.rank_high if placed else None,
        "tied": row.tied if placed else False,
        "id": row.pk,
        "board": f"checklist:{row.challenge_id}:{row.phase_id or '-'}:",
        "paired_rank_low": row.paired_rank_low if placed else None,
        "paired_rank_high": row.paired_rank_high if placed else None,
        "paired_tied": row.paired_tied if placed else None,
        "created_at": row.submitted_at,
        "is_baseline": row.is_baseline,
        "method_name": row.method_name,
        "method_description": row.method_description,
        "method_url": row.method_url,
    }


def board_has_phaseless_rows(challenge: Challenge) -> bool:
    """Whether entries made before the challenge had phases are on a board of their own."""
    return ChecklistBoardRow.objects.on_phase(None).filter(challenge=challenge).exists()


def checklist_board_page_rows(ids: list[int]) -> dict[int, ChecklistBoardRow]:
    """The stored board rows ``ids`` (a page whose ids :func:`checklist_board` chose, so seen
    by its viewer) by pk, with their teams."""
    return ChecklistBoardRow.objects.select_related("team").in_bulk(ids)
