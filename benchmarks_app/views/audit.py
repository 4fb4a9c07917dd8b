"""Audit pages: the boards (one per dataset release and judge), a scanner's report, a run's
per-repo results, and the forms that submit a scanner's results (one repo, or a dataset)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import F, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Lower, NullIf
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from benchmarks_app.formatting import percent_interval_text, whole_number
from benchmarks_app.models import Benchmark, EvaluationRun, RunStatus, Scanner
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
    AUDIT_ORDERING_COLUMNS,
    Board,
    BoardNotFound,
    board_is_restricted,
    board_row,
    board_row_queryset,
    resolve_board,
)
from benchmarks_app.selectors.audit_progress import board_runs_in_progress
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE
from benchmarks_app.selectors.judge_agreement import audit_board_agreement
from benchmarks_app.selectors.judge_records import judge_record_choices
from benchmarks_app.selectors.runs import ended_run_failure_causes
from benchmarks_app.selectors.visibility import visible_repos
from benchmarks_app.services.audit import (
    AuditRunError,
    AuditUnchanged,
    audit_run_choose,
    audit_scan_upload,
    audit_scanner_describe,
    participant_openai_allowed,
)
from benchmarks_app.views.audit_datasets import board_chips, board_query, submit_dataset
from benchmarks_app.views.board_tables import BoardTable
from benchmarks_app.views.entry_fields import method_fields
from benchmarks_app.views.paired import paired_columns
from benchmarks_app.views.tables import Column, SortableTable, row_url
from scoring.audit.metrics import render_markdown

app_name = "audit"


def _scanner_link(row: Any) -> str:
    url = row_url("audit:scanner", row["scanner"])
    return f"{url}?{row['report_query']}" if row.get("report_query") else url


def _method_link(row: Any) -> str | None:
    return row.get("method_url") or None


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
    Column("precision", "P", kind="pct", digits=3, title="Precision: TP / reported"),
    Column("recall", "R", kind="pct", digits=3, title="Recall: TP / verified findings"),
    Column("f1", "F1", kind="pct", digits=3, title="Harmonic mean of P and R"),
    # Short labels keep all sixteen columns on a laptop screen; the titles spell them out.
    Column(
        "precision_with_partial",
        "P+",
        kind="pct",
        digits=3,
        title="Precision with partial matches counted (QA findings left out)",
    ),
    Column(
        "recall_with_partial",
        "R+",
        kind="pct",
        digits=3,
        title="Recall with partial matches counted",
    ),
    Column(
        "f1_with_partial",
        "F1+",
        kind="pct",
        digits=3,
        title="F1 with partial matches counted: the ranking metric",
    ),
]

# What a reader needs to compare entries comes first and alone by default (rank, scanner, the
# ranking metric with its interval, the rank range): a board of 22 columns pushed those off a
# laptop's screen. The counts and the other ratios wait behind "Show all columns". Rank,
# scanner and F1+ stay in view on a phone while the others scroll (site.css, ``table.board``).
_DETAIL_KEYS = frozenset(c.key for c in LEADERBOARD_COLUMNS) - {"scanner", "f1_with_partial"}
BOARD_COLUMNS = [
    LEADERBOARD_COLUMNS[0],
    next(c for c in LEADERBOARD_COLUMNS if c.key == "f1_with_partial"),
    Column(
        "ci",
        "95% CI",
        sortable=False,
        value=lambda row: percent_interval_text(row.get("ci_low"), row.get("ci_high")),
        title="95% bootstrap interval of F1+ (the release's truth findings resampled)",
    ),
    Column(
        "rank_range",
        "Rank range",
        sortable=False,
        title="The ranks the scanner could take given the 95% intervals",
    ),
    Column(
        "tied",
        "Tied",
        value=lambda row: "≈" if row.get("tied_with_above") else "",
        sortable=False,
        title="≈: its interval overlaps the row above (statistically tied with it)",
    ),
    *paired_columns("scanners"),
    Column(
        "baseline",
        "Baseline",
        value=lambda row: "baseline" if row.get("is_baseline") else "",
        sortable=False,
        title="A reference scanner of the maintainers (ranked like any other)",
    ),
    Column(
        "method_name",
        "Method",
        link=_method_link,
        title="The method behind the entry, as its owner describes it (linked where given)",
        detail=True,
    ),
    *(replace(c, detail=True) for c in LEADERBOARD_COLUMNS[1:] if c.key in _DETAIL_KEYS),
    Column(
        "ci_low",
        "F1+ low",
        kind="pct",
        digits=3,
        title="Lower end of the 95% bootstrap interval of F1+ (truth findings resampled)",
        detail=True,
    ),
    Column(
        "ci_high",
        "F1+ high",
        kind="pct",
        digits=3,
        title="Upper end of that interval",
        detail=True,
    ),
]
INCOMPLETE_PAGE_SIZE = 25
INCOMPLETE_COLUMNS = [
    BOARD_COLUMNS[0],
    Column("coverage", "Coverage", sortable=False, title="Repos evaluated / repos in release"),
    *(
        c
        for c in BOARD_COLUMNS[1:]
        if c.key not in ("repos", "rank_range", "tied", "ci", "paired_range", "paired_tied")
    ),
]

REPORT_COLUMNS = [
    Column("repo", "Repo"),
    *(c for c in LEADERBOARD_COLUMNS if c.key not in ("scanner", "repos")),
]


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


# Column key → the stored row's column it sorts by (the API's, plus the page's own keys).
BOARD_ORDERING: dict[str, Any] = {
    **AUDIT_ORDERING_COLUMNS,
    "repos": F("repos_evaluated"),
    **{
        key: F(key)
        for key in ("truth", "scan", "qa", "precision_with_partial", "recall_with_partial")
    },
    # Entries without a method (blank) come last, as missing values do.
    "method_name": NullIf(Lower(KT("metrics__method_name")), Value("")),
    "ci_low": F("ci_low"),
    "ci_high": F("ci_high"),
}


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
    found = Scanner.objects.filter(name=name).first()
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
        },
    )


@login_required
@require_POST
def run_choose(request: HttpRequest, pk: int) -> HttpResponse:
    """The owner's button on the run page: this run stands for the scanner (or no longer)."""
    run = get_object_or_404(EvaluationRun, pk=pk, benchmark=Benchmark.AUDIT)
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
    found = get_object_or_404(Scanner, name=name)
    try:
        audit_scanner_describe(
            user=request.user, scanner=found, description=request.POST.get("description", "")
        )
    except (AuditRunError, PermissionError) as exc:
        messages.error(request, str(exc).partition(": ")[2] or str(exc))
    else:
        messages.success(request, "Description saved.")
    return redirect("audit:scanner", name=found.name)


# --- Submission form -----------------------------------------------------------------------


def judge_choices(user: Any) -> list[tuple[str, str]]:
    """Offline always; OpenAI only where the site is configured to pay for (or serve) it and
    this user may spend it, by the same rules the service applies; for staff, every curated
    judge record too."""
    choices = [("offline", "Offline (TF-IDF similarity, free and deterministic)")]
    configured = getattr(settings, "OPENAI_API_KEY", "") or getattr(
        settings, "OPENAI_BASE_URL", None
    )
    if configured and participant_openai_allowed(user):
        model = getattr(settings, "JUDGE_MODEL", "o4-mini")
        choices.append(("openai", f"OpenAI ({model}, majority of votes)"))
    if getattr(user, "is_staff", False):
        # Staff may judge with any curated record (a local server, another model).
        choices += judge_record_choices(kinds=("offline", "openai"))
    return choices


class ScanSubmissionForm(forms.Form):
    """Only the shape of the request is checked here; the repo is looked up and everything
    else (scanner name and owner, judge, file size and content) is left to the service that
    the API calls, so the page says exactly what the API says."""

    # Plain text fields rendered as selects: a stale page (a repo or judge no longer offered)
    # then gets the service's message, not Django's "Select a valid choice".
    repo = forms.CharField(max_length=200, widget=forms.Select)
    scanner = forms.CharField(
        label="Scanner name",
        max_length=200,
        help_text="As it should appear on the leaderboard, e.g. my-auditor-v2. The first "
        "submission of a name makes it yours; only you can replace its results.",
    )
    # Left blank (only by a script), the site's default judge is used, as by the API.
    judge = forms.CharField(required=False, widget=forms.Select, initial="offline")
    declared_empty = forms.BooleanField(
        required=False,
        label="My tool found nothing in this repo",
        help_text="Needed to submit a file without findings (an empty file is refused).",
    )
    confirm_untitled = forms.BooleanField(
        required=False,
        label="Keep findings without title and description",
        help_text="Such findings are refused unless you confirm that your tool reported them so.",
    )
    method_name, method_description, method_url = method_fields()
    # An empty file goes on to the service, which names it as the API does.
    file = forms.FileField(
        label="Results file (JSON)",
        allow_empty_file=True,
        widget=forms.ClearableFileInput(attrs={"accept": ".json,application/json"}),
    )

    def __init__(
        self, *args: Any, repos: list[tuple[str, str]], user: Any = None, **kwargs: Any
    ) -> None:
        """``repos``: (project id, name) of the repos that results can be submitted for."""
        super().__init__(*args, **kwargs)
        self.fields["repo"].widget = forms.Select(
            choices=[("", "Choose a repo…")]
            + [(pid, pid if name == pid else f"{pid} — {name}") for pid, name in repos]
        )
        self.fields["judge"].widget = forms.Select(choices=judge_choices(user))
        self.fields["file"].help_text = (
            f"A list of findings, or {{project, findings: [...], token_usage, ...}}; at most "
            f"{settings.UPLOAD_MAX_MB} MB."
        )


@login_required
def submit(request: HttpRequest) -> HttpResponse:
    repos = list(
        visible_repos(request.user).order_by("project_id").values_list("project_id", "name")
    )
    form = ScanSubmissionForm(
        request.POST or None,
        request.FILES or None,
        repos=repos,
        user=request.user,
        initial={"repo": request.GET.get("repo", ""), "scanner": request.GET.get("scanner", "")},
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        repo = visible_repos(request.user).filter(project_id=data["repo"]).first()
        if repo is None:
            form.add_error("repo", f"no repo with project id {data['repo']!r}")
        else:
            try:
                run = audit_scan_upload(
                    user=request.user,
                    scanner_name=data["scanner"],
                    repo=repo,
                    upload=data["file"],
                    judge=data["judge"] or None,
                    declared_empty=bool(data.get("declared_empty")),
                    confirm_untitled=bool(data.get("confirm_untitled")),
                    method_name=data.get("method_name", ""),
                    method_description=data.get("method_description", ""),
                    method_url=data.get("method_url", ""),
                )
            except AuditUnchanged as exc:
                messages.info(request, f"Unchanged: {str(exc).removeprefix('unchanged: ')}.")
                return redirect("audit:run", pk=exc.run.pk)
            except (AuditRunError, PermissionError) as exc:
                field, _, message = str(exc).partition(": ")
                if message and field in form.fields:
                    form.add_error(field, message)
                else:
                    form.add_error(None, str(exc))
            else:
                messages.success(
                    request,
                    f"Results of {data['scanner'].strip()} for {repo.project_id} received; "
                    f"evaluation run #{run.pk} is queued.",
                )
                return redirect("audit:run", pk=run.pk)
    return render(
        request,
        "audit/submit.html",
        {
            "form": form,
            "repos": repos,
            "max_mb": settings.UPLOAD_MAX_MB,
            "example_repo": repos[0][0] if repos else "PROJECT_ID",
        },
        status=400 if request.method == "POST" else 200,
    )


urlpatterns = [
    path("", leaderboard, name="leaderboard"),
    path("submit/", submit, name="submit"),
    path("submit/dataset/", submit_dataset, name="submit-dataset"),
    path("runs/<int:pk>/", run_detail, name="run"),
    path("runs/<int:pk>/choose/", run_choose, name="run-choose"),
    path("scanners/<str:name>/", scanner, name="scanner"),
    path("scanners/<str:name>/describe/", scanner_describe, name="scanner-describe"),
]
