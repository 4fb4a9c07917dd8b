"""Reads of the safety-probe benchmark's reports: a submission's latest scored run as a
document, where it stands on its board, and the report page (the boards themselves are
:mod:`.probe_boards`').

Probe submissions and their reports are public (see ``visibility.visible_probe_submissions``),
except a hidden phase's until it is revealed (staff and their owner only); every read here
starts from ``visible_probe_submissions`` so that the rule applies in one place.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from benchmarks_app.models import (
    Phase,
    ProbeCaseResult,
    ProbeRunReport,
    Response,
    ResponseSubmission,
    RunStatus,
)
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, attach_marks, light_fields
from benchmarks_app.selectors.probe_boards import (
    ROW_COLUMNS,
    ProbeReportNotFound,
    board_placed,
    probe_board_rows,
)
from benchmarks_app.selectors.visibility import visible_probe_submissions
from scoring.probes.metrics import RANKING_METRIC
from scoring.probes.report import LIMITATIONS


def _visible_submissions(user: Any = None) -> QuerySet[ResponseSubmission]:
    """Probe submissions the user may read (the policy's: a hidden phase's only to staff and
    their owner until it is revealed)."""
    return visible_probe_submissions(user)


def _reports(user: Any = None) -> Any:
    submissions = _visible_submissions(user)
    return (
        ProbeRunReport.objects.filter(
            submission__in=submissions.values("pk"), run__status=RunStatus.SUCCEEDED
        )
        .select_related("run", "submission__suite")
        .order_by("-created_at", "-id")
    )


def _report_version(report: ProbeRunReport) -> str:
    # Reports written before versions were recorded share one legacy board ("").
    return str((report.metrics or {}).get("suite_version") or "")


def probe_latest_report(*, submission_id: int, user: Any = None) -> ProbeRunReport:
    # An id past the column's range (a URL's digits are unbounded) names no submission: the
    # database driver would refuse to bind it.
    in_range = 0 < submission_id < 2**63
    report = _reports(user).filter(submission_id=submission_id).first() if in_range else None
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

    The board of all entries, else (an entry of a hidden phase) its phase's board where the
    user may see it. None when another report of the same model represents it there.
    """
    phases: list[Phase | None] = [None]
    if report.submission.phase_id is not None:
        phases.append(report.submission.phase)
    for phase in phases:
        board = probe_board_rows(
            suite_name=report.submission.suite.name,
            version=_report_version(report),
            phase=phase,
            user=user,
        )
        row = (
            board.filter(run_id=report.run_id)
            .values(*ROW_COLUMNS, *light_fields(PROBE_SHAPE))
            .first()
        )
        if row is not None:
            attach_marks(PROBE_SHAPE, [row])
            row["rank"] = row["position"]
            position = {
                "suite_version": row["suite_version"],
                "phase": row["phase__slug"],
                "entries": board.count(),
                "metric": RANKING_METRIC,
                **{k: row[k] for k in BOARD_FIELDS},
            }
            if not board_placed(phase, user):
                # The rank is among rows the user cannot see, and the count is of their own
                # rows only ("Rank 2 of 1"): neither means anything to them, both leak.
                position.update(entries=None, rank=None, rank_low=None, rank_high=None, tied=False)
            return position
    return None


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
    submission = _visible_submissions(user).filter(pk=submission_id).first()
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
    return list(_visible_submissions(user).values_list("pk", flat=True))


def probe_submission(*, submission_id: int, user: Any = None) -> ResponseSubmission:
    submission = _visible_submissions(user).filter(pk=submission_id).first()
    if submission is None:
        raise ProbeReportNotFound(f"no submission {submission_id}")
    return submission
