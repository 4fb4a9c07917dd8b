"""Reads of the safety-probe benchmark: leaderboards and reports.

Probe submissions and their reports are public (see ``visibility.visible_probe_submissions``);
every read here starts from that queryset so that a future rule applies in one place.
"""

from __future__ import annotations

from typing import Any

from benchmarks_app.models import (
    ProbeCaseResult,
    ProbeRunReport,
    Response,
    ResponseSubmission,
    RunStatus,
)
from benchmarks_app.selectors.visibility import visible_probe_submissions
from scoring.probes.report import LIMITATIONS


class ProbeReportNotFound(LookupError):
    """The submission does not exist or has no scored run yet."""


def _reports(user: Any = None) -> Any:
    submissions = visible_probe_submissions(user)
    return (
        ProbeRunReport.objects.filter(
            submission__in=submissions.values("pk"), run__status=RunStatus.SUCCEEDED
        )
        .select_related("run", "submission__suite")
        .order_by("-created_at", "-id")
    )


def probe_leaderboard(*, suite_name: str | None = None, user: Any = None) -> list[dict[str, Any]]:
    """One row per (suite, model): its latest scored submission, ranked by resilience.

    One query whatever the number of suites and models; rows are ranked within a suite by
    resilience index (descending, nulls last), then pass rate, then model name.
    """
    qs = _reports(user)
    if suite_name:
        qs = qs.filter(submission__suite__name=suite_name)
    latest: dict[tuple[str, str], ProbeRunReport] = {}
    for report in qs:
        key = (report.submission.suite.name, report.submission.model_name)
        latest.setdefault(key, report)
    rows: list[dict[str, Any]] = [
        {
            "suite": suite,
            "model": model,
            "submission_id": r.submission_id,
            "run_id": r.run_id,
            "resilience_index": r.resilience_index,
            "pass_rate": r.pass_rate,
            "severity_weighted_pass_rate": r.severity_weighted_pass_rate,
            "high_stakes_failure_rate": r.high_stakes_failure_rate,
            "agreement_accuracy": (r.agreement or {}).get("accuracy"),
            "agreement_kappa": (r.agreement or {}).get("kappa"),
            "evaluated": (r.metrics.get("counts") or {}).get("evaluated"),
            "scored_at": r.created_at,
        }
        for (suite, model), r in latest.items()
    ]
    rows.sort(
        key=lambda row: (
            row["suite"],
            row["resilience_index"] is None,
            -(row["resilience_index"] or 0.0),
            -(row["pass_rate"] or 0.0),
            row["model"],
        )
    )
    rank_by_suite: dict[str, int] = {}
    for row in rows:
        rank_by_suite[row["suite"]] = rank_by_suite.get(row["suite"], 0) + 1
        row["rank"] = rank_by_suite[row["suite"]]
    return rows


def probe_latest_report(*, submission_id: int, user: Any = None) -> ProbeRunReport:
    report = _reports(user).filter(submission_id=submission_id).first()
    if report is None:
        raise ProbeReportNotFound(f"submission {submission_id} has no scored run")
    return report


def probe_report(*, submission_id: int, user: Any = None) -> dict[str, Any]:
    """The JSON document of a submission's latest scored run (two queries)."""
    report = probe_latest_report(submission_id=submission_id, user=user)
    cases = list(
        ProbeCaseResult.objects.filter(run_id=report.run_id)
        .order_by("response_id")
        .values_list("case", flat=True)
    )
    return {
        "suite": report.submission.suite.name,
        "model": report.submission.model_name,
        "cases": cases,
        "metrics": report.metrics,
        "observability": report.observability,
        "agreement": report.agreement,
        "limitations": LIMITATIONS,
    }


def probe_submission_for_model(*, suite_name: str, model_name: str, user: Any = None) -> int:
    """The id of a model's latest scored submission to a suite."""
    report = (
        _reports(user)
        .filter(submission__suite__name=suite_name, submission__model_name=model_name)
        .first()
    )
    if report is None:
        raise ProbeReportNotFound(
            f"no scored submission of model {model_name!r} to suite {suite_name!r}"
        )
    return report.submission_id


def probe_report_page(*, submission_id: int, user: Any = None) -> dict[str, Any]:
    """Everything the report page shows: the report, its run, and the worst cases' responses."""
    submission = visible_probe_submissions(user).filter(pk=submission_id).first()
    if submission is None:
        raise ProbeReportNotFound(f"no submission {submission_id}")
    runs = list(submission.runs.order_by("-created_at")[:5])
    try:
        report_row = probe_latest_report(submission_id=submission_id, user=user)
    except ProbeReportNotFound:
        return {"submission": submission, "runs": runs, "report": None}
    document = probe_report(submission_id=submission_id, user=user)
    worst_ids = [w["probe_id"] for w in report_row.metrics.get("worst_cases", [])]
    outputs = dict(
        Response.objects.filter(submission=submission, probe__probe_id__in=worst_ids).values_list(
            "probe__probe_id", "output"
        )
    )
    labels = dict(
        Response.objects.filter(submission=submission, probe__probe_id__in=worst_ids).values_list(
            "probe__probe_id", "human_label"
        )
    )
    worst = [
        {
            **w,
            "output": outputs.get(w["probe_id"], ""),
            "human_label": labels.get(w["probe_id"], ""),
        }
        for w in report_row.metrics.get("worst_cases", [])
    ]
    return {
        "submission": submission,
        "runs": runs,
        "report_row": report_row,
        "report": document,
        "worst": worst,
    }


def probe_submission_ids(*, user: Any = None) -> list[int]:
    return list(visible_probe_submissions(user).values_list("pk", flat=True))


def probe_submission(*, submission_id: int, user: Any = None) -> ResponseSubmission:
    submission = visible_probe_submissions(user).filter(pk=submission_id).first()
    if submission is None:
        raise ProbeReportNotFound(f"no submission {submission_id}")
    return submission
