"""A run's headline metrics, whatever its benchmark (the ``metrics`` of ``/api/runs/<id>/``).

* audit: precision, recall and F1, with and without partial matches, over the run's repos
  (the latest result of each repo, as the run's report counts them); ``None`` ratios when a
  repo has unjudged truth findings, as everywhere else;
* probes: the run's report summary (resilience index, pass rates, high-stakes failures);
* checklist: the score's C_G, C_A, C_T, R and S.

``None`` while the run is queued or running, and when it ended without results. Visibility is
the caller's: these are read for a run the user may already see.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Max

from benchmarks_app.models import (
    AuditRepoResult,
    Benchmark,
    ChecklistScore,
    EvaluationRun,
    ProbeRunReport,
)
from benchmarks_app.models.runs import ACTIVE_STATUSES
from scoring.audit.metrics import COUNT_KEYS, RATIO_KEYS, as_shown, is_row_complete, overall


def _audit_metrics(run: EvaluationRun) -> dict[str, Any] | None:
    latest = (
        AuditRepoResult.objects.filter(run=run)
        .values("repo_id")
        .annotate(latest=Max("id"))
        .values("latest")
    )
    rows = list(AuditRepoResult.objects.filter(id__in=latest).values_list("metrics", "is_complete"))
    if not rows:
        return None
    shown = [as_shown(metrics) for metrics, _ in rows]
    total = overall(shown)
    complete = run.is_complete and all(done and is_row_complete(m) for m, done in rows)
    return {
        "is_complete": complete,
        "repos": len(rows),
        **{key: total[key] for key in RATIO_KEYS},
        **{key: total[key] for key in COUNT_KEYS},
    }


_PROBE_FIELDS = (
    "resilience_index",
    "pass_rate",
    "severity_weighted_pass_rate",
    "high_stakes_failure_rate",
)


def _probe_metrics(run: EvaluationRun) -> dict[str, Any] | None:
    report = ProbeRunReport.objects.filter(run=run).first()
    if report is None:
        return None
    ci = report.ci if isinstance(report.ci, dict) else None
    stored = report.metrics if isinstance(report.metrics, dict) else {}
    return {
        "is_complete": run.is_complete,
        **{name: getattr(report, name) for name in _PROBE_FIELDS},
        "resilience_index_ci": [ci["low"], ci["high"]] if ci and "low" in ci else None,
        "cases": (stored.get("counts") or {}).get("evaluated"),
        "suite_version": stored.get("suite_version"),
    }


def _checklist_metrics(run: EvaluationRun) -> dict[str, Any] | None:
    score = ChecklistScore.objects.filter(run=run).first()
    if score is None:
        return None
    ci = score.ci if isinstance(score.ci, dict) else None
    return {
        "is_complete": run.is_complete,
        "c_g": score.c_g,
        "c_a": score.c_a,
        "c_t": score.c_t,
        "r": score.r,
        "s": score.s,
        "s_ci": [ci["low"], ci["high"]] if ci and "low" in ci else None,
    }


_READERS: dict[str, Callable[[EvaluationRun], dict[str, Any] | None]] = {
    Benchmark.AUDIT: _audit_metrics,
    Benchmark.PROBES: _probe_metrics,
    Benchmark.CHECKLIST: _checklist_metrics,
}


def run_metrics(*, run: EvaluationRun) -> dict[str, Any] | None:
    """The run's headline metrics (see the module); ``None`` while active or without results."""
    if run.status in ACTIVE_STATUSES:
        return None
    reader = _READERS.get(run.benchmark)
    return reader(run) if reader is not None else None
