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
from scoring.probes.metrics import RANKING_METRIC
from scoring.probes.report import LIMITATIONS
from scoring.stats import board_ranks


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


def _ci_bounds(report: ProbeRunReport) -> tuple[float | None, float | None]:
    ci = report.ci or {}
    if ci.get("metric") != RANKING_METRIC:
        return None, None
    return ci.get("low"), ci.get("high")


def _report_version(report: ProbeRunReport) -> str:
    # Reports written before versions were recorded share one legacy board ("").
    return str((report.metrics or {}).get("suite_version") or "")


def _add_board_ranks(rows: list[dict[str, Any]]) -> None:
    """``rank_low``, ``rank_high`` and ``tied`` of one board's rows (given best first)."""
    marks = board_ranks([(r["resilience_index"], r["ci_low"], r["ci_high"]) for r in rows])
    for row, mark in zip(rows, marks, strict=True):
        row.update(rank_low=mark.rank_low, rank_high=mark.rank_high, tied=mark.tied)


def probe_leaderboard(
    *, suite_name: str | None = None, version: str | None = None, user: Any = None
) -> list[dict[str, Any]]:
    """One board per (suite, suite version): each model's latest report on it, ranked.

    A suite version is the content hash of the probes, rules, scoring settings and refusal
    signal a report was scored with (``metrics["suite_version"]``); reports of different
    versions are never ranked together. Within a board, rows are ranked by resilience index
    (descending, nulls last), then pass rate, then model name; each row carries its 95%
    bootstrap interval (``ci_low``, ``ci_high``, stored when the run finished), the rank range
    it implies (``rank_low``, ``rank_high``) and ``tied`` when its interval overlaps the row
    above. Boards come suite by suite, the newest version of a suite first. One query.
    """
    qs = _reports(user)
    if suite_name:
        qs = qs.filter(submission__suite__name=suite_name)
    latest: dict[tuple[str, str, str], ProbeRunReport] = {}
    for report in qs:
        key = (report.submission.suite.name, _report_version(report), report.submission.model_name)
        latest.setdefault(key, report)
    if version is not None:
        latest = {k: r for k, r in latest.items() if k[1] == version}
    newest: dict[tuple[str, str], Any] = {}
    rows: list[dict[str, Any]] = []
    for (suite, suite_version, model), r in latest.items():
        low, high = _ci_bounds(r)
        newest[(suite, suite_version)] = max(
            r.created_at, newest.get((suite, suite_version), r.created_at)
        )
        rows.append(
            {
                "suite": suite,
                "suite_version": suite_version,
                "model": model,
                "submission_id": r.submission_id,
                "run_id": r.run_id,
                "resilience_index": r.resilience_index,
                "ci_low": low,
                "ci_high": high,
                "ci": r.ci,
                "pass_rate": r.pass_rate,
                "severity_weighted_pass_rate": r.severity_weighted_pass_rate,
                "high_stakes_failure_rate": r.high_stakes_failure_rate,
                "agreement_accuracy": (r.agreement or {}).get("accuracy"),
                "agreement_kappa": (r.agreement or {}).get("kappa"),
                "evaluated": (r.metrics.get("counts") or {}).get("evaluated"),
                "scored_at": r.created_at,
            }
        )
    rows.sort(
        key=lambda row: (
            row["suite"],
            -newest[(row["suite"], row["suite_version"])].timestamp(),
            row["suite_version"],
            row["resilience_index"] is None,
            -(row["resilience_index"] or 0.0),
            -(row["pass_rate"] or 0.0),
            row["model"],
        )
    )
    boards: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        board = boards.setdefault((row["suite"], row["suite_version"]), [])
        board.append(row)
        row["rank"] = len(board)
    for board in boards.values():
        _add_board_ranks(board)
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
        "suite_version": _report_version(report),
        "model": report.submission.model_name,
        "cases": cases,
        "metrics": report.metrics,
        "ci": report.ci,
        "board": probe_board_position(report=report, user=user),
        "observability": report.observability,
        "agreement": report.agreement,
        "limitations": LIMITATIONS,
    }


BOARD_FIELDS = ("rank", "rank_low", "rank_high", "tied", "ci_low", "ci_high")


def probe_board_position(*, report: ProbeRunReport, user: Any = None) -> dict[str, Any] | None:
    """Where ``report`` stands on its board (its suite at its suite version), or None.

    None when a newer report of the same model on that board replaced it.
    """
    version = _report_version(report)
    board = probe_leaderboard(suite_name=report.submission.suite.name, version=version, user=user)
    row = next((r for r in board if r["run_id"] == report.run_id), None)
    if row is None:
        return None
    return {
        "suite_version": version,
        "entries": len(board),
        "metric": RANKING_METRIC,
        **{k: row[k] for k in BOARD_FIELDS},
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
