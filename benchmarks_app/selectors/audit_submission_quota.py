"""How many audit submissions a participant has left: today's (UTC day) against the site's
daily limit, or, in a phase with limits of its own, the phase's against its daily and total
limits. Read before a submission is accepted (:mod:`benchmarks_app.services.audit.submissions`)
and shown on the submission form.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from benchmarks_app.models import Benchmark, EvaluationRun
from benchmarks_app.models.phases import Phase
from benchmarks_app.selectors.phases import phase_limits


@dataclass(frozen=True)
class AuditSubmissionQuota:
    """A participant's audit submissions today (UTC day); ``daily_limit`` None: no limit.

    In a phase with limits of its own, both counts are of that phase's submissions, and
    ``total_limit`` caps the phase's submissions in all (None: no cap).
    """

    daily_limit: int | None
    used_today: int
    resets_at: datetime
    total_limit: int | None = None
    used_total: int = 0
    phase: str | None = None

    @property
    def remaining(self) -> int | None:
        left = []
        if self.daily_limit is not None:
            left.append(max(0, self.daily_limit - self.used_today))
        if self.total_limit is not None:
            left.append(max(0, self.total_limit - self.used_total))
        return min(left) if left else None

    @property
    def total_reached(self) -> bool:
        return self.total_limit is not None and self.used_total >= self.total_limit

    @property
    def exceeded_message(self) -> str:
        where = f" in phase {self.phase}" if self.phase else ""
        if self.total_reached:
            return (
                f"the limit of {self.total_limit} audit submission(s){where} is reached "
                f"({self.used_total} made); no more are accepted in this phase"
            )
        return (
            f"the daily limit of {self.daily_limit} audit submission(s){where} is reached "
            f"({self.used_today} today); the next one is possible after "
            f"{self.resets_at:%Y-%m-%d %H:%M} UTC"
        )

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "daily_limit": self.daily_limit,
            "used_today": self.used_today,
            "remaining": self.remaining,
            "resets_at": self.resets_at.isoformat(),
        }
        if self.phase is not None:
            out.update(phase=self.phase, total_limit=self.total_limit, used_total=self.used_total)
        return out


def audit_daily_limit() -> int | None:
    """``AUDIT_DAILY_SUBMISSIONS`` (default 10; None: unlimited; 0: none allowed)."""
    value = getattr(settings, "AUDIT_DAILY_SUBMISSIONS", 10)
    return None if value is None else max(0, int(value))


def audit_submission_quota(
    *, user: Any, now: datetime | None = None, phase: Phase | None = None
) -> AuditSubmissionQuota:
    """Every audit run the user created today counts, whatever became of it: a run that the
    judge failed still cost its calls. Refused submissions store no run and do not count
    (nor do identical re-uploads, which store none).

    Submissions in a ``phase`` that sets limits (daily, total) count against those, within
    the phase, instead of the site's daily limit (``AUDIT_DAILY_SUBMISSIONS``).
    """
    now = now or timezone.now()
    day_start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    mine = EvaluationRun.objects.filter(
        benchmark=Benchmark.AUDIT, created_by_id=getattr(user, "pk", None)
    )
    daily, total = phase_limits(phase)
    if phase is not None and (daily is not None or total is not None):
        in_phase = mine.filter(phase=phase)
        return AuditSubmissionQuota(
            daily_limit=daily,
            used_today=in_phase.filter(created_at__gte=day_start).count(),
            resets_at=day_start + timedelta(days=1),
            total_limit=total,
            used_total=in_phase.count() if total is not None else 0,
            phase=phase.name,
        )
    return AuditSubmissionQuota(
        daily_limit=audit_daily_limit(),
        used_today=mine.filter(created_at__gte=day_start).count(),
        resets_at=day_start + timedelta(days=1),
    )
