"""Audit pages: the boards (one per dataset release and judge), a scanner's report, a run's
per-repo results, and the routes of the audit namespace. The boards' column specs are in
:mod:`audit_columns`, the submission forms in :mod:`audit_submit` (one repo) and
:mod:`audit_datasets` (a dataset), what they share in :mod:`audit_common`."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from benchmarks_app.formatting import whole_number
from benchmarks_app.models import Benchmark, EvaluationRun, RunStatus
from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.audit import (
    RUN_PAGE_REPOS,
    ReportNotFound,
    RunPage,
    audit_report,
    audit_run_detail,
)
from benchmarks_app.selectors.audit_boards import (
    Board,
    BoardNotFound,
    board_is_restricted,
    board_row,
    board_row_queryset,
    own_scanner_ids,
    resolve_board,
)
from benchmarks_app.selectors.audit_progress import board_runs_in_progress
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE
from benchmarks_app.selectors.judge_agreement import audit_board_agreement
from benchmarks_app.selectors.runs import ended_run_failure_causes
from benchmarks_app.selectors.visibility import visible_runs, visible_scanners
from benchmarks_app.services.audit import (
    AuditRunError,
    audit_run_choose,
    audit_scanner_describe,
)
from benchmarks_app.views.audit_columns import (
    BOARD_COLUMNS,
    BOARD_ORDERING,
    INCOMPLETE_COLUMNS,
    INCOMPLETE_PAGE_SIZE,
    REPORT_COLUMNS,
)
from benchmarks_app.views.audit_common import board_chips, board_query
from benchmarks_app.views.audit_datasets import submit_dataset
from benchmarks_app.views.audit_submit import submit
from benchmarks_app.views.board_tables import BoardReading, BoardTable
from benchmarks_app.views.runs import run_actions
from benchmarks_app.views.tables import SortableTable
from scoring.audit.metrics import render_markdown

app_name = "audit"


def _board(request: HttpRequest) -> Board | None:
    try:
        return resolve_board(
            dataset=request.GET.get("dataset") or None,
            release=request.GET.get("release") or None,
            judge=request.GET.get("judge") or None,
            phase=request.GET.get("phase") or None,
        )
    except BoardNotFound as exc:
        raise Http404(str(exc)) from None


def _own_rows(request: HttpRequest) -> Any:
    """Whether a row dict is one of the signed-in reader's scanners ("you are here")."""
    mine = own_scanner_ids(request.user)
    return (lambda row: row.get("scanner_id") in mine) if mine else None


def leaderboard(request: HttpRequest) -> HttpResponseBase:
    board = _board(request)
    rows = board_row_queryset(board, user=request.user) if board is not None else None
    query = board_query(board) if board is not None else ""

    def row(stored: AuditBoardRow) -> dict[str, Any]:
        return {**board_row(stored), "report_query": query}

    restricted = board_is_restricted(board, request.user)

    others = BoardTable(
        request,
        rows.filter(sort_group=1) if rows is not None else None,
        INCOMPLETE_COLUMNS,
        ordering=BOARD_ORDERING,
        row=row,
        shape=AUDIT_SHAPE,
        filename="audit-incomplete",
        prefix="incomplete",
        # Not ranked: neither a rank column nor places (counting them passed over every
        # ranked row of the board, 7 ms at 100,000).
        rank=False,
        marks=False,
        # A shorter page than the ranked table's: these entries are listed for their owners to
        # find (sortable, paged), not compared, and two 100-row tables made the board's page
        # 170 KB.
        page_size=INCOMPLETE_PAGE_SIZE,
        empty_message="",
    )
    if (download := others.download()) is not None:
        return download
    table = BoardTable(
        request,
        # Ranked rows (complete on every repo): the first group of the board's order index.
        rows.filter(sort_group=0) if rows is not None else None,
        BOARD_COLUMNS,
        ordering=BOARD_ORDERING,
        row=row,
        shape=AUDIT_SHAPE,
        # Every row of the board is shown unless its phase is hidden: the ranked rows are
        # then the board's first ones, and a page's places follow from its offset.
        places_from_offset=not restricted,
        # The incomplete entries follow them: a page in the board's lower half counts its
        # marks from the board's end (the last page at 100,000 entries: 11 ms of counts).
        whole_board=not restricted,
        rows_after=others.total,
        filename="audit-leaderboard",
        reading=BoardReading(
            noun="scanners",
            value_key="f1_with_partial",
            label_key="scanner",
            percent=True,
            tie_key="tied_with_above",
            mine=_own_rows(request),
        ),
        empty_message="No scanner has been evaluated on every repo of this release yet. "
        "Submit a scanner's results for the whole dataset with the form, or import them "
        "with manage.py import_audit and run manage.py evaluate_audit --scanner NAME --wait.",
    )
    if (download := table.download()) is not None:
        return download
    title = f"Audit findings: {board.release}, judge {board.judge}" if board else "Audit findings"
    in_progress = board_runs_in_progress(release=board.release, judge=board.judge) if board else []
    agreement = (
        audit_board_agreement(
            release_id=board.release.pk,
            judge=board.judge,
            phase_id=board.phase.pk if board.phase else None,
            # An unrestricted board's tables hold all its rows: ranked and incomplete.
            rows=table.total + others.total,
        )
        if board is not None and not restricted
        else None
    )
    return render(
        request,
        "audit/leaderboard.html",
        {
            "title": title,
            "board": board,
            "restricted": restricted,
            "agreement": agreement,
            "in_progress": in_progress,
            "filters": board_chips(board) if board is not None else [],
            "intro": "Each scanner on each repo's latest complete evaluation with this "
            "release's frozen truth and this judge; counts are summed over repos before "
            "ratios are computed. P = precision, R = recall; ranked by F1+, where P+, R+ and "
            "F1+ count partial matches too (QA findings, of Info / Best Practices severity, "
            "are left out of P+). Only scanners evaluated on every repo of the release are "
            "ranked; equal numbers share a rank. Click a column to sort by it.",
            "table": table,
            "incomplete": others,
            "empty_action_url": reverse("audit:submit-dataset"),
            "empty_action_label": "Submit results for a dataset",
        },
    )


def scanner(request: HttpRequest, name: str) -> HttpResponseBase:
    run_id = request.GET.get("run")
    try:
        report = audit_report(
            scanner_name=name,
            run_id=whole_number(run_id),
            dataset=request.GET.get("dataset") or None,
            release=request.GET.get("release") or None,
            judge=request.GET.get("judge") or None,
            user=request.user,
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
        empty_message="This scanner has no complete evaluation on this board yet.",
    )
    if (download := table.download()) is not None:
        return download
    runs = report["run"] if isinstance(report["run"], list) else [report["run"]]
    found = visible_scanners(request.user).filter(name=name).first()
    in_progress = board_runs_in_progress(scanner=found) if found is not None else []
    user = request.user
    return render(
        request,
        "audit/scanner.html",
        {
            "scanner": found,
            "can_describe": found is not None
            and user.is_authenticated
            and (user.is_staff or found.owner_id == user.pk),
            "report": report,
            "table": table,
            "runs": [r for r in runs if r],
            "in_progress": in_progress,
            "download_query": request.GET.urlencode(),
        },
    )


def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        view = RunPage(
            repo=request.GET.get("repo") or None,
            page=whole_number(request.GET.get("page")) or 1,
            repos_page=whole_number(request.GET.get("repos")) or 1,
        )
        run, sections = audit_run_detail(user=request.user, run_id=pk, view=view)
    except EvaluationRun.DoesNotExist as exc:
        raise Http404(str(exc) or "No such audit run") from None
    repo_count = run.repos.count()
    owner = run.scanner is not None and run.scanner.owner_id == getattr(request.user, "pk", -1)
    return render(
        request,
        "audit/run.html",
        {
            "run": run,
            "sections": sections,
            "view": view,
            "repo_pages": range(1, -(-repo_count // RUN_PAGE_REPOS) + 1)
            if view.repo is None and repo_count > RUN_PAGE_REPOS
            else [],
            "is_active": run.status in ACTIVE_STATUSES,
            "causes": ended_run_failure_causes(run=run),
            "can_choose": owner
            and run.release_id is not None
            and run.status == RunStatus.SUCCEEDED
            and run.is_complete,
            "actions": run_actions(request, run),
        },
    )


@login_required
@require_POST
def run_choose(request: HttpRequest, pk: int) -> HttpResponse:
    """The owner's button on the run page: this run stands for the scanner (or no longer)."""
    # Another entrant's run in a hidden phase is as absent as a run that never existed.
    run = get_object_or_404(visible_runs(request.user), pk=pk, benchmark=Benchmark.AUDIT)
    chosen = request.POST.get("chosen", "1") not in ("0", "false", "")
    try:
        audit_run_choose(user=request.user, run=run, chosen=chosen)
    except (AuditRunError, PermissionError) as exc:
        messages.error(request, str(exc).partition(": ")[2] or str(exc))
    else:
        messages.success(
            request,
            f"Run #{run.pk} now stands for {run.scanner} on its board."
            if chosen
            else f"{run.scanner}'s latest results stand for it on its board again.",
        )
    return redirect("audit:run", pk=run.pk)


@login_required
@require_POST
def scanner_describe(request: HttpRequest, name: str) -> HttpResponse:
    """The owner's description form on the scanner page."""
    # A hidden entrant's name answers as a free one does (issue 36 item 3), not "not yours".
    found = get_object_or_404(visible_scanners(request.user), name=name)
    try:
        audit_scanner_describe(
            user=request.user, scanner=found, description=request.POST.get("description", "")
        )
    except (AuditRunError, PermissionError) as exc:
        messages.error(request, str(exc).partition(": ")[2] or str(exc))
    else:
        messages.success(request, "Description saved.")
    return redirect("audit:scanner", name=found.name)


urlpatterns = [
    path("", leaderboard, name="leaderboard"),
    path("submit/", submit, name="submit"),
    path("submit/dataset/", submit_dataset, name="submit-dataset"),
    path("runs/<int:pk>/", run_detail, name="run"),
    path("runs/<int:pk>/choose/", run_choose, name="run-choose"),
    path("scanners/<str:name>/", scanner, name="scanner"),
    path("scanners/<str:name>/describe/", scanner_describe, name="scanner-describe"),
]
