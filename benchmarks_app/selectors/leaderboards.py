"""Reads that span the three benchmarks: the benchmark index and one's own submissions.

Each benchmark's board lives in its own selector module (``selectors.audit_boards``,
``selectors.probe_boards``, ``selectors.checklist_boards``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from benchmarks_app.models import (
    Benchmark,
    ChecklistSubmission,
    EvaluationRun,
    ResponseSubmission,
    RunStatus,
    Scanner,
)
from benchmarks_app.selectors.run_counts import visible_run_counts

logger = logging.getLogger(__name__)

BENCHMARK_DESCRIPTIONS: dict[str, str] = {
    Benchmark.AUDIT: (
        "AI auditing tools' findings matched against verified ground-truth vulnerabilities "
        "by an LLM judge."
    ),
    Benchmark.PROBES: (
        "Model responses to safety probes, scored by curated regex rules: pass rates, "
        "severity-weighted risk and resilience."
    ),
    Benchmark.CHECKLIST: (
        "Teams of paper authors, ranked by how their genuine, adversarial and "
        "truth-adversarial papers' NeurIPS checklists fare with an LLM assessor."
    ),
}


@dataclass(frozen=True)
class BenchmarkSummary:
    slug: str
    name: str
    description: str
    run_count: int
    succeeded_runs: int
    active_runs: int


def benchmark_summaries(user: Any) -> list[BenchmarkSummary]:
    """The three benchmarks with the runs this user can see, read from the stored counts
    (``selectors.run_counts``): a few queries whatever the number of runs."""
    counts = visible_run_counts(user)
    return [
        BenchmarkSummary(
            slug=value,
            name=str(label),
            description=BENCHMARK_DESCRIPTIONS[value],
            run_count=sum(counts[value].values()),
            succeeded_runs=counts[value][RunStatus.SUCCEEDED],
            active_runs=counts[value][RunStatus.QUEUED] + counts[value][RunStatus.RUNNING],
        )
        for value, label in Benchmark.choices
    ]


# --- Own submissions ---------------------------------------------------------------------


@dataclass(frozen=True)
class OwnSubmission:
    """One thing a user submitted, in any benchmark, with the state of its latest run."""

    benchmark: str
    id: int
    label: str
    created_at: datetime
    status: str
    run_id: int | None
    run_status: str | None
    progress_done: int
    progress_total: int
    error: str


def _latest_run(**target: Any) -> QuerySet[EvaluationRun]:
    return EvaluationRun.objects.filter(**target).order_by("-created_at", "-id")


def _with_latest_run(qs: QuerySet[Any], target_field: str) -> QuerySet[Any]:
    latest = _latest_run(**{target_field: OuterRef("pk")})
    return qs.annotate(
        latest_run_id=Subquery(latest.values("id")[:1]),
        latest_run_status=Subquery(latest.values("status")[:1]),
        latest_run_done=Subquery(latest.values("progress_done")[:1]),
        latest_run_total=Subquery(latest.values("progress_total")[:1]),
        latest_run_error=Subquery(latest.values("error")[:1]),
    )


def _row(benchmark: str, obj: Any, label: str, own_status: str | None = None) -> OwnSubmission:
    run_status = obj.latest_run_status
    return OwnSubmission(
        benchmark=benchmark,
        id=obj.pk,
        label=label,
        created_at=obj.created_at,
        # A submission's own status (checklist) wins; otherwise its latest run's, or
        # "received" while no run exists yet.
        status=own_status or run_status or "received",
        run_id=obj.latest_run_id,
        run_status=run_status,
        progress_done=obj.latest_run_done or 0,
        progress_total=obj.latest_run_total or 0,
        error=getattr(obj, "error", "") or obj.latest_run_error or "",
    )


def own_submissions(
    user: Any, *, benchmark: str | None = None, status: str | None = None
) -> list[OwnSubmission]:
    """Everything the user submitted, newest first, in a constant number of queries.

    * audit: the scanners the user owns (each scanner's results are scored by one run);
    * probes: the response submissions the user uploaded;
    * checklist: the submissions of the user's teams (a team's entries are shared).
    """
    if user is None or not user.is_authenticated:
        return []
    rows: list[OwnSubmission] = []
    if benchmark in (None, Benchmark.AUDIT):
        scanners = _with_latest_run(Scanner.objects.filter(owner=user), "scanner")
        rows += [_row(Benchmark.AUDIT, s, s.name) for s in scanners]
    if benchmark in (None, Benchmark.PROBES):
        probe_subs = _with_latest_run(
            ResponseSubmission.objects.filter(owner=user).select_related("suite"),
            "probe_submission",
        )
        rows += [_row(Benchmark.PROBES, s, f"{s.model_name} on {s.suite.name}") for s in probe_subs]
    if benchmark in (None, Benchmark.CHECKLIST):
        team_ids = user.memberships.values("team_id")
        checklist_subs = _with_latest_run(
            ChecklistSubmission.objects.filter(team_id__in=team_ids).select_related("team"),
            "checklist_submission",
        )
        rows += [
            _row(
                Benchmark.CHECKLIST,
                s,
                s.label or f"{s.team.name} #{s.pk} ({s.get_kind_display()})",
                own_status=s.status,
            )
            for s in checklist_subs
        ]
    if status:
        rows = [r for r in rows if r.status == status]
    rows.sort(key=lambda r: (r.created_at, r.id), reverse=True)
    return rows
