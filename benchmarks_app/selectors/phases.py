"""Reads about phases: which one is open for a target, who may see a phase's board.

Used by the three benchmarks' submission services (a submission lands in the open phase, or
is refused with the phases' dates) and board selectors (a hidden phase's board is staff-only
until revealed; participants then see only their own rows).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from benchmarks_app.models import Challenge, DatasetRelease, Phase, ProbeSuite
from benchmarks_app.selectors.visibility import is_staff

PhaseTarget = Challenge | DatasetRelease | ProbeSuite


class PhaseClosed(Exception):
    """A submission arrived while no phase of its target was open; the message gives dates."""

    code = "phase_closed"

    def __init__(self, message: str, *, phases: list[Phase]) -> None:
        super().__init__(message)
        self.message = message
        self.phases = phases


def _when(value: datetime | None) -> str:
    if value is None:
        return "open-ended"
    return timezone.localtime(value, timezone.get_fixed_timezone(0)).strftime("%Y-%m-%d %H:%M UTC")


def phase_dates(phase: Phase) -> str:
    """``final: 2026-12-01 00:00 UTC to 2026-12-15 00:00 UTC``."""
    return f"{phase.name}: {_when(phase.starts_at)} to {_when(phase.ends_at)}"


def target_phases(target: PhaseTarget) -> list[Phase]:
    return list(Phase.objects.for_target(target).order_by("starts_at", "pk"))


def phase_open_for(target: PhaseTarget, *, now: datetime | None = None) -> Phase | None:
    """The phase a submission to ``target`` made now belongs to.

    None when the target has no phases at all (submissions are then governed by the target's
    own open flag and quotas, as before phases existed). Raises :class:`PhaseClosed`, naming
    every phase with its dates, when the target has phases but none is open now. When phases
    overlap, the one that started last wins (a final phase opened before development ends).
    """
    phases = target_phases(target)
    if not phases:
        return None
    now = now or timezone.now()
    open_now = [p for p in phases if p.is_open(now)]
    if open_now:
        return max(open_now, key=lambda p: (p.starts_at, p.pk))
    upcoming = [p for p in phases if p.starts_at > now]
    listing = "; ".join(phase_dates(p) for p in phases)
    if upcoming:
        first = upcoming[0]
        message = (
            f"No phase of {target} is open now: the next, {first.name}, opens "
            f"{_when(first.starts_at)}. Phases: {listing}."
        )
    else:
        message = f"Every phase of {target} has ended. Phases: {listing}."
    raise PhaseClosed(message, phases=phases)


def phase_board_public(phase: Phase | None) -> bool:
    """Whether everybody may see the board of ``phase`` (None: a board without phases)."""
    return phase is None or phase.is_revealed


def phase_board_visible(phase: Phase | None, user: Any) -> bool:
    """Whether ``user`` may see every row of the board (staff always may)."""
    return phase_board_public(phase) or is_staff(user)


def phase_limits(phase: Phase | None) -> tuple[int | None, int | None]:
    """(daily, total) entries per entrant in ``phase``; None where the phase sets none."""
    if phase is None:
        return None, None
    return phase.daily_limit, phase.total_limit
