"""What the audit and probe submission forms say before an upload: the phase a submission
made now lands in (or why none is open) and what is left of the entrant's quota there.

The checklist form already showed both (issue 37 item 8); these read the same rules as the
services that refuse an upload (the phase open now, its limits, else the site's daily limit
for audit), so the form says beforehand what the refusal would say afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from benchmarks_app.models import AuditDataset, Phase, ProbeSuite, ResponseSubmission
from benchmarks_app.selectors.audit_boards import published_release
from benchmarks_app.selectors.audit_submission_quota import audit_submission_quota
from benchmarks_app.selectors.phases import (
    PhaseClosed,
    PhaseTarget,
    phase_dates,
    phase_limits,
    phase_open_for,
)
from benchmarks_app.selectors.visibility import is_staff


@dataclass(frozen=True)
class SubmissionWindow:
    """One target of a form (a dataset, a suite, or "" for the site as a whole).

    ``phase_text``: the phase a submission lands in now, with its dates ("" without phases);
    ``closed_text``: why nothing is accepted now ("" while open); ``quota_text``: what is
    left ("" where nothing limits the entrant).
    """

    target: str
    phase_text: str
    closed_text: str
    quota_text: str


def _phase_now(target: PhaseTarget) -> tuple[Phase | None, str]:
    try:
        return phase_open_for(target), ""
    except PhaseClosed as exc:
        return None, exc.message


def _phase_text(phase: Phase | None) -> str:
    if phase is None:
        return ""
    hidden = "" if phase.is_revealed else "; its board stays hidden until the organizers reveal it"
    return f"lands in the {phase.name} phase ({phase_dates(phase)}){hidden}"


def _left(limit: int | None, used: int, what: str) -> str:
    return "" if limit is None else f"{max(0, limit - used)} of {limit} {what}"


def audit_submission_windows(user: Any) -> list[SubmissionWindow]:
    """Per dataset with a published release: its phase now and the user's quota there; one
    line for the site's daily limit where a dataset has no phase with limits of its own."""
    if is_staff(user):
        return []
    windows: list[SubmissionWindow] = []
    site_limit_applies = False
    for dataset in AuditDataset.objects.order_by("slug"):
        release = published_release(dataset)
        if release is None:
            continue
        phase, closed = _phase_now(release)
        daily, total = phase_limits(phase)
        quota = ""
        if phase is not None and (daily is not None or total is not None):
            counts = audit_submission_quota(user=user, phase=phase)
            parts = [
                _left(counts.daily_limit, counts.used_today, "left today"),
                _left(counts.total_limit, counts.used_total, "left in this phase"),
            ]
            quota = "; ".join(p for p in parts if p)
        elif not closed:
            site_limit_applies = True
        if phase is not None or closed or quota:
            windows.append(
                SubmissionWindow(
                    target=f"dataset {dataset.slug}",
                    phase_text=_phase_text(phase),
                    closed_text=closed,
                    quota_text=quota,
                )
            )
    if site_limit_applies or not windows:
        counts = audit_submission_quota(user=user)
        if counts.daily_limit is not None:
            windows.append(
                SubmissionWindow(
                    target="",
                    phase_text="",
                    closed_text="",
                    quota_text=f"{_left(counts.daily_limit, counts.used_today, 'left today')} "
                    f"(the site's daily limit; it resets at {counts.resets_at:%H:%M} UTC)",
                )
            )
    return windows


def probe_submission_windows(user: Any, suite_names: list[str]) -> list[SubmissionWindow]:
    """Per suite with phases: its phase now and the user's entries left there (the service
    counts the phase's entries per entrant, the daily ones over the last 24 hours)."""
    if is_staff(user):
        return []
    windows: list[SubmissionWindow] = []
    for suite in ProbeSuite.objects.filter(name__in=suite_names).order_by("name"):
        phase, closed = _phase_now(suite)
        if phase is None and not closed:
            continue  # no phases: nothing limits an entrant
        quota = ""
        daily, total = phase_limits(phase)
        if phase is not None and getattr(user, "pk", None) is not None:
            mine = ResponseSubmission.objects.filter(phase=phase, owner_id=user.pk)
            since = timezone.now() - timedelta(days=1)
            parts = [
                _left(daily, mine.filter(created_at__gt=since).count(), "left in 24 hours"),
                _left(total, mine.count() if total is not None else 0, "left in this phase"),
            ]
            quota = "; ".join(p for p in parts if p)
        windows.append(
            SubmissionWindow(
                target=f"suite {suite.name}",
                phase_text=_phase_text(phase),
                closed_text=closed,
                quota_text=quota,
            )
        )
    return windows
