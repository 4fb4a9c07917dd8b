"""The runs a user can see, counted per benchmark and status without reading every run.

The stored counts (``RunCount``, kept by ``services.run_counts``) are split by what
``visibility.visible_runs`` decides on, so that a viewer's count is

* staff: every key;
* anyone else: the public keys (no checklist team's entry, no phase that is hidden and not yet
  revealed: asked of the small phase table each time, so a reveal counts at once), plus the
  viewer's own runs among the rest, counted from the run table in the same query: their teams'
  checklist entries (an index range on ``checklist_submission``) and, only while some phase is
  hidden, their runs in the hidden phases (through ``visible_runs`` itself; an index range on
  those phases). Anonymous visitors have no own runs.

Two small queries: on a machine where the database waits for a CPU each round trip costs more
than these reads, and building ``visible_runs``' query costs more CPU than running it.

This relies on three properties of ``visible_runs`` (the tests compare this count with a fresh
count of ``visible_runs(user)`` on random histories): every public run is visible to everyone,
a team's members see all its checklist entries, and no one but staff sees another team's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from django.db.models import Count, QuerySet, Sum

from benchmarks_app.models import (
    ChecklistSubmission,
    EvaluationRun,
    Membership,
    RunCount,
)
from benchmarks_app.selectors.visibility import is_staff, unrevealed_phases, visible_runs


def visible_run_counts(user: Any) -> dict[str, Counter[str]]:
    """Runs ``user`` can see, per benchmark, then per status: two small queries (three while
    some phase is hidden and the viewer is signed in)."""
    staff = is_staff(user)
    hidden = [] if staff else list(unrevealed_phases().values_list("pk", flat=True))
    stored = RunCount.objects.order_by()
    if not staff:
        stored = stored.filter(checklist_entry=False).exclude(phase_key__in=hidden)
    parts: list[QuerySet[Any]] = [
        stored.values("benchmark", "status").annotate(total=Sum("runs")),
    ]
    if not staff and getattr(user, "is_authenticated", False):
        # The viewer's own runs among those not public, in two disjoint parts, each an index
        # range: their teams' entries (all of which a member sees), and, while some phase is
        # hidden, their runs in those phases (asked of ``visible_runs``, whose query costs
        # more to build than these reads).
        entries = ChecklistSubmission.objects.filter(
            team_id__in=Membership.objects.filter(user_id=user.pk).values("team_id")
        ).values("pk")
        own: list[QuerySet[EvaluationRun]] = [
            EvaluationRun.objects.filter(checklist_submission_id__in=entries)
        ]
        if hidden:
            own.append(
                visible_runs(user).filter(checklist_submission_id__isnull=True, phase_id__in=hidden)
            )
        parts += [
            runs.order_by().values("benchmark", "status").annotate(total=Count("*")) for runs in own
        ]
    rows = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        counts[row["benchmark"]][row["status"]] += int(row["total"] or 0)
    return counts
