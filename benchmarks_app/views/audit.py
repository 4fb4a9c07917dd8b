"""Audit pages: the scanner leaderboard, a scanner's report and a run's per-repo results."""

from __future__ import annotations

import json
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path, reverse

from benchmarks_app.models import EvaluationRun, RunStatus
from benchmarks_app.selectors.audit import (
    ReportNotFound,
    audit_leaderboard,
    audit_report,
    audit_run_detail,
)
from benchmarks_app.views.tables import Column, SortableTable
from scoring.audit.metrics import render_markdown

app_name = "audit"


def _scanner_link(row: Any) -> str:
    return reverse("audit:scanner", args=[row["scanner"]])


LEADERBOARD_COLUMNS = [
    Column("scanner", "Scanner", link=_scanner_link),
    Column("repos", "Repos", kind="int"),
    Column("truth", "Truth", kind="int", title="Verified findings in the evaluated repos"),
    Column("scan", "Reported", kind="int", title="Findings the scanner reported"),
    Column("qa", "QA", kind="int", title="Reported findings of Info / Best Practices severity"),
    Column("tp", "TP", kind="int", title="Exact matches"),
    Column("partial", "Partial", kind="int"),
    Column("fp", "FP", kind="int"),
    Column("fn", "FN", kind="int"),
    Column("precision", "Precision", kind="pct", digits=3),
    Column("recall", "Recall", kind="pct", digits=3),
    Column("f1", "F1", kind="pct", digits=3),
    Column("precision_with_partial", "P (w/ partial)", kind="pct", digits=3),
    Column("recall_with_partial", "R (w/ partial)", kind="pct", digits=3),
    Column("f1_with_partial", "F1 (w/ partial)", kind="pct", digits=3),
]

REPORT_COLUMNS = [
    Column("repo", "Repo"),
    *(c for c in LEADERBOARD_COLUMNS if c.key not in ("scanner", "repos")),
]


def leaderboard(request: HttpRequest) -> HttpResponse:
    table = SortableTable(
        request,
        audit_leaderboard(),
        LEADERBOARD_COLUMNS,
        filename="audit-leaderboard",
        empty_message="No scanner has a complete evaluation yet. Import results with "
        "`manage.py import_audit` and run `manage.py evaluate_audit --scanner NAME --wait`, "
        "or use “Evaluate with…” on repos in the admin.",
    )
    if (download := table.download()) is not None:
        return download
    return render(
        request,
        "audit/leaderboard.html",
        {
            "title": "Audit findings: scanner leaderboard",
            "intro": "Each scanner on each repo's latest complete evaluation; counts are "
            "summed over repos before ratios are computed. QA findings (Info / Best "
            "Practices) are left out of the with-partial precision.",
            "table": table,
        },
    )


def scanner(request: HttpRequest, name: str) -> HttpResponse:
    run_id = request.GET.get("run")
    try:
        report = audit_report(
            scanner_name=name, run_id=int(run_id) if run_id and run_id.isdigit() else None
        )
    except ReportNotFound as exc:
        raise Http404(str(exc)) from None
    fmt = request.GET.get("format")
    if fmt == "json":
        response = HttpResponse(json.dumps(report, indent=2), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="audit-{name}.json"'
        return response
    if fmt == "md":
        response = HttpResponse(render_markdown(report), content_type="text/markdown")
        response["Content-Disposition"] = f'attachment; filename="audit-{name}.md"'
        return response
    table = SortableTable(
        request,
        [*report["repos"], report["overall"]] if report["repos"] else [],
        REPORT_COLUMNS,
        filename=f"audit-{name}",
        rank=False,
        empty_message="This scanner has no complete evaluation yet.",
    )
    if (download := table.download()) is not None:
        return download
    runs = report["run"] if isinstance(report["run"], list) else [report["run"]]
    return render(
        request,
        "audit/scanner.html",
        {"report": report, "table": table, "runs": [r for r in runs if r]},
    )


def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        run, sections = audit_run_detail(user=request.user, run_id=pk)
    except EvaluationRun.DoesNotExist:
        raise Http404("No such audit run") from None
    return render(
        request,
        "audit/run.html",
        {
            "run": run,
            "sections": sections,
            "is_active": run.status in (RunStatus.QUEUED, RunStatus.RUNNING),
        },
    )


urlpatterns = [
    path("", leaderboard, name="leaderboard"),
    path("runs/<int:pk>/", run_detail, name="run"),
    path("scanners/<str:name>/", scanner, name="scanner"),
]
