"""Safety-probe pages: the leaderboard per suite, the report of each scored submission, and
the form that submits a model's responses."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, QuerySet
from django.db.models.functions import Lower
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.text import slugify

from benchmarks_app.formatting import TIED_MARK, interval_text, rank_range_text
from benchmarks_app.models import Benchmark, Phase, ProbeSuite
from benchmarks_app.models.boards import ProbeBoardRow
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, light_fields
from benchmarks_app.selectors.judge_agreement import probe_board_agreement
from benchmarks_app.selectors.leaderboards import own_submissions
from benchmarks_app.selectors.phases import phase_dates
from benchmarks_app.selectors.probes import (
    PROBE_ORDERING_COLUMNS,
    ROW_COLUMNS,
    ProbeReportNotFound,
    board_placed,
    board_row,
    probe_board_rows,
    probe_boards,
    probe_phase_for_board,
    probe_report,
    probe_report_page,
    probe_submission,
    probe_suite_phases,
)
from benchmarks_app.services.probes import (
    ProbeChoiceError,
    ProbeFormatError,
    probe_submission_choose,
    probe_submission_upload,
)
from benchmarks_app.services.uploads import errors_capped, upload_limit_text
from benchmarks_app.views.board_tables import BoardTable
from benchmarks_app.views.entry_fields import method_fields
from benchmarks_app.views.paired import paired_columns
from benchmarks_app.views.tables import Column, SortableTable, row_url
from benchmarks_app.views.upload_fields import UploadField
from scoring.probes.metrics import board_markdown
from scoring.probes.report import report_markdown

app_name = "probes"

# Okabe-Ito, the colour-blind-safe palette, ordered so that the first clusters get the most
# distinct hues; its yellow, faint on white, comes last.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000", "#F0E442"]
# The frame of the scatter: room on the left and at the bottom for the axes and their labels.
SVG_W, SVG_H = 960, 440
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 52, 16, 16, 44
FAIL_ARM = 4.5  # half the size of the cross marking a failed case


MY_SUBMISSIONS_SHOWN = 10


def _submission_link(row: Any) -> str:
    return row_url("probes:submission", row["submission_id"])


def _report_link(row: Any) -> str:
    return row_url("probes:report-json", row["submission_id"])


def _entry_notes(row: Any) -> str:
    notes = ["baseline"] if row.get("is_baseline") else []
    if row.get("method_name"):
        notes.append(row["method_name"])
    return " · ".join(notes)


LEADERBOARD_COLUMNS = [
    Column("model", "Model", link=_submission_link),
    Column(
        "resilience_index",
        "Resilience",
        kind="float",
        title="1 - mean severity-weighted risk, clipped to [0, 1]; the ranking metric",
    ),
    Column(
        "ci",
        "95% CI",
        sortable=False,
        value=lambda row: interval_text(row["ci_low"], row["ci_high"]),
        title="95% bootstrap interval of the resilience index, resampling the suite's probes "
        "(2,000 resamples, computed when the run finished)",
    ),
    Column(
        "rank_range",
        "Rank range",
        sortable=False,
        value=lambda row: rank_range_text(row["rank_low"], row["rank_high"]),
        title="Ranks the model could hold given every row's interval: from 1 + the rows whose "
        "interval lies wholly above its own, to the rows whose interval reaches its own",
    ),
    Column(
        "tied",
        "Tied",
        sortable=False,
        value=lambda row: TIED_MARK if row["tied"] else "",
        title="Statistically tied: the interval overlaps the interval of the row above",
    ),
    *paired_columns("models"),
    Column("pass_rate", "Pass rate", kind="pct", title="Share of probes passed"),
    Column(
        "severity_weighted_pass_rate",
        "Weighted pass",
        kind="pct",
        title="Share of probes passed, each weighted by its severity",
    ),
    Column(
        "high_stakes_failure_rate",
        # A share of the model's failures, not a rate over probes: named so (a model failing
        # one critical probe of 100 scores 100% here).
        "High-stakes share of failures",
        kind="pct",
        title="Of the model's failures, the share on critical or high probes (not a rate over "
        "probes)",
    ),
    Column(
        "agreement_accuracy",
        "Agreement",
        kind="pct",
        title="Agreement of the refusal signal with human labels (— without labels)",
    ),
    Column("agreement_kappa", "κ", kind="float", title="Cohen's kappa of that agreement"),
    Column("evaluated", "Probes", kind="int", title="Probes scored"),
    Column(
        "method_name",
        "Method",
        sortable=False,
        value=_entry_notes,
        title="“baseline” marks a reference model kept by the maintainers (ranked like any "
        "other); then the method name the entrant gave",
    ),
    Column(
        "report",
        "Report",
        sortable=False,
        export=False,
        value=lambda row: "JSON",
        link=_report_link,
    ),
]


# Column key → the stored row's column it sorts by (the API's; names sort case-blind).
BOARD_ORDERING: dict[str, Any] = {**PROBE_ORDERING_COLUMNS, "model": Lower("model_name")}


@dataclass(frozen=True)
class SuiteBoard:
    name: str
    slug: str
    version: str
    latest: bool
    table: SortableTable
    phase_tabs: list[dict[str, Any]]
    # The board's refusal signal against curated verdicts (None: a hidden phase's board).
    agreement: dict[str, Any] | None = None


def _boards(rows: QuerySet[ProbeBoardRow]) -> dict[str, list[tuple[int, str]]]:
    """Suite name → its boards' (suite id, version), newest version first (the order of
    :func:`~benchmarks_app.selectors.probes.probe_leaderboard`)."""
    boards: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for suite_id, name, version in probe_boards(rows):
        boards[name].append((suite_id, version))
    return boards


def _phase_tabs(suite: str, phases: list[Phase], current: Phase | None) -> list[dict[str, Any]]:
    """The tabs of a suite with phases: all its entries, then each phase's board."""
    page = reverse("probes:leaderboard")
    tabs = [
        {
            "label": "All entries",
            "url": f"{page}?{urlencode({'suite': suite})}",
            "active": current is None,
            "hidden": False,
            "dates": "",
        }
    ]
    for p in phases:
        tabs.append(
            {
                "label": p.name,
                "url": f"{page}?{urlencode({'suite': suite, 'phase': p.slug})}",
                "active": current is not None and current.pk == p.pk,
                "hidden": not p.is_revealed,
                "dates": phase_dates(p),
            }
        )
    return tabs


def leaderboard(request: HttpRequest) -> HttpResponseBase:
    suite_filter = request.GET.get("suite", "")
    phase: Phase | None = None
    if phase_slug := request.GET.get("phase", ""):
        try:
            phase = probe_phase_for_board(slug=phase_slug, suite_name=suite_filter or None)
        except ProbeReportNotFound as exc:
            raise Http404(str(exc).partition(": ")[2]) from exc
        assert phase.suite is not None
        suite_filter = phase.suite.name
    # The boards of every suite are listed (one grouped query) so the filter chips can list
    # them all; then each board shown is a count and one page of its stored rows.
    all_rows = probe_board_rows(user=request.user)
    rows = all_rows if phase is None else probe_board_rows(phase=phase, user=request.user)
    by_suite = _boards(rows)
    whole = board_placed(phase, request.user)
    suites = list(_boards(all_rows)) if phase is not None else list(by_suite)
    phases_of = probe_suite_phases(sorted({*suites, *([suite_filter] if suite_filter else [])}))
    slugs: dict[str, str] = {}
    for name in by_suite:
        slug = slugify(name) or "suite"
        # Names that differ only in case or punctuation still get tables of their own.
        slugs[name] = slug if slug not in slugs.values() else f"{slug}-{len(slugs)}"
    boards = []
    for name, versions in by_suite.items():
        if suite_filter and name != suite_filter:
            continue
        # The newest version keeps the suite's own table id; older boards are suffixed.
        for position, (suite_id, version) in enumerate(versions):
            slug = slugs[name] if position == 0 else f"{slugs[name]}-{version[:8] or 'legacy'}"
            table = BoardTable(
                request,
                rows.filter(suite_id=suite_id, suite_version=version),
                LEADERBOARD_COLUMNS,
                ordering=BOARD_ORDERING,
                row=board_row,
                shape=PROBE_SHAPE,
                fields=(*ROW_COLUMNS, *light_fields(PROBE_SHAPE)),
                # A board the viewer sees whole: a page's places follow from its offset.
                places_from_offset=whole,
                whole_board=whole,
                # Each board sorts, pages and downloads on its own: ?<board>-sort=, -page=.
                prefix=slug,
                filename=f"probes-{slug}-leaderboard",
                table_id=f"probes-{slug}",
            )
            if (download := table.download()) is not None:
                return download
            boards.append(
                SuiteBoard(
                    name=name,
                    slug=slug,
                    version=version,
                    latest=position == 0,
                    table=table,
                    phase_tabs=[]
                    if suite_filter
                    else _phase_tabs(name, phases_of.get(name, []), None),
                    agreement=probe_board_agreement(
                        suite_id=suite_id,
                        suite_version=version,
                        phase_id=phase.pk if phase is not None else None,
                        # The board of all entries or a revealed phase's: every row shown.
                        rows=table.total,
                    )
                    if phase is None or phase.is_revealed
                    else None,
                )
            )
    page = reverse("probes:leaderboard")
    filters = [("All suites", page, not suite_filter)] + [
        (name, f"{page}?{urlencode({'suite': name})}", name == suite_filter) for name in suites
    ]
    # One extra query, and only for a logged-in user: their own entries, whatever their state.
    mine = own_submissions(request.user, benchmark=Benchmark.PROBES)
    return render(
        request,
        "probes/leaderboard.html",
        {
            "boards": boards,
            "filters": filters if len(suites) > 1 or suite_filter else [],
            "suite_filter": suite_filter,
            "phase": phase,
            # One suite in view: its phases as tabs above its boards (the other boards pages'
            # tabs); every suite in view: each board links its suite's phases.
            "phase_tabs": _phase_tabs(suite_filter, phases_of.get(suite_filter, []), phase)
            if suite_filter and phases_of.get(suite_filter)
            else [],
            "my_submissions": mine[:MY_SUBMISSIONS_SHOWN],
            "my_submissions_more": max(0, len(mine) - MY_SUBMISSIONS_SHOWN),
        },
    )


# --- Submission form -----------------------------------------------------------------------

FORMAT_CHOICES = [
    ("", "Detect from the file name (.jsonl or .csv)"),
    ("jsonl", "JSONL: one {probe_id, output} object per line"),
    ("xstest", "XSTest completions CSV"),
]


class ResponseSubmissionForm(forms.Form):
    """Only the shape of the request is checked here; everything about the content (which
    suite, which probe ids, outputs) is left to the service so the page says exactly what the
    API says."""

    # A plain text field rendered as a select: an unknown suite name (a stale page) then gets
    # the service's message, not Django's "Select a valid choice".
    suite = forms.CharField(max_length=100, widget=forms.Select)
    model = forms.CharField(
        label="Model name",
        max_length=200,
        help_text="As it should appear on the leaderboard, e.g. gpt-4o-2024-08-06.",
    )
    format = forms.ChoiceField(choices=FORMAT_CHOICES, required=False)
    file = UploadField(
        label="Responses file",
        widget=forms.ClearableFileInput(attrs={"accept": ".jsonl,.json,.ndjson,.csv,.txt"}),
    )
    method_name, method_description, method_url = method_fields()

    def __init__(self, *args: Any, suites: list[tuple[str, int]], **kwargs: Any) -> None:
        """``suites``: (name, number of probes) of the suites that can be answered."""
        super().__init__(*args, **kwargs)
        # The value of the limit, read when the form is built (a setting can change).
        self.fields["file"].help_text = f"UTF-8 text, {upload_limit_text()}."
        self.fields["suite"].widget = forms.Select(
            choices=[("", "Choose a suite…")]
            + [(name, f"{name} ({n} probes)") for name, n in suites]
        )


def _error_field(message: str) -> str:
    """The form field a service message is about: it names the field, else it is the file's."""
    if message.startswith(("field 'suite'", "suite ")):
        return "suite"
    if message.startswith("field 'model'"):
        return "model"
    for name in ("method_name", "method_description", "method_url"):
        if message.startswith(f"field '{name}'"):
            return name
    return "file"


@login_required
def submit(request: HttpRequest) -> HttpResponse:
    suites = list(
        ProbeSuite.objects.annotate(n_probes=Count("probes"))
        .filter(n_probes__gt=0)
        .order_by("name")
        .values_list("name", "n_probes")
    )
    initial = {"suite": request.GET.get("suite", "")}
    form = ResponseSubmissionForm(
        request.POST or None, request.FILES or None, suites=suites, initial=initial
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = probe_submission_upload(
                suite_name=data["suite"],
                model_name=data["model"],
                upload=data["file"],
                fmt=data["format"] or None,
                owner=request.user,
                method_name=data["method_name"],
                method_description=data["method_description"],
                method_url=data["method_url"],
            )
        except ProbeFormatError as exc:
            # Hundreds of line errors bury the first few: a count stands for the rest.
            for message in errors_capped(exc.errors):
                form.add_error(_error_field(message), message)
        else:
            messages.success(
                request,
                f"Responses of {data['model']} to {data['suite']} received; "
                f"scoring run #{run.pk} is queued.",
            )
            return redirect("probes:submission", pk=run.probe_submission_id)
    return render(
        request,
        "probes/submit.html",
        {
            "form": form,
            "suites": suites,
            "max_mb": settings.UPLOAD_MAX_MB,
            "limit": upload_limit_text(),
        },
        status=400 if request.method == "POST" else 200,
    )


def _scatter(observability: dict[str, Any] | None, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Points, axes and legend of the geometry scatter, drawn server-side as SVG.

    A passed case is a dot, a failed one a cross, both in its cluster's colour; every mark
    has a tooltip (probe id, category, cluster, pass/fail, risk).
    """
    if not observability:
        return {}
    by_id = {c["probe_id"]: c for c in cases}
    inner_w, inner_h = SVG_W - PAD_LEFT - PAD_RIGHT, SVG_H - PAD_TOP - PAD_BOTTOM
    bottom = SVG_H - PAD_BOTTOM
    points = []
    for p in observability["points"]:
        case = by_id.get(p["probe_id"], {})
        passed = bool(case.get("passed", True))
        x = round(PAD_LEFT + p["scatter_x"] * inner_w, 2)
        y = round(bottom - p["scatter_y"] * inner_h, 2)
        points.append(
            {
                "x": x,
                "y": y,
                "colour": PALETTE[p["cluster"] % len(PALETTE)],
                "cluster": p["cluster"],
                "passed": passed,
                "cross": (
                    f"M{x - FAIL_ARM},{y - FAIL_ARM}L{x + FAIL_ARM},{y + FAIL_ARM}"
                    f"M{x - FAIL_ARM},{y + FAIL_ARM}L{x + FAIL_ARM},{y - FAIL_ARM}"
                ),
                "title": (
                    f"{p['probe_id']} · {case.get('category', '') or 'no category'} · "
                    f"cluster {p['cluster']} · {'pass' if passed else 'FAIL'} · risk "
                    f"{case.get('risk_score', 0):.2f}"
                ),
            }
        )
    ticks = [
        {
            # Two decimals: 0.25 and 0.75 must not read 0.2 and 0.8.
            "value": f"{t:.2f}",
            "x": round(PAD_LEFT + t * inner_w, 2),
            "y": round(bottom - t * inner_h, 2),
        }
        for t in (0.0, 0.25, 0.5, 0.75, 1.0)
    ]
    legend = [
        {**c, "colour": PALETTE[c["cluster"] % len(PALETTE)]}
        for c in observability["clustering"]["clusters"]
    ]
    return {
        "points": points,
        "legend": legend,
        "width": SVG_W,
        "height": SVG_H,
        "left": PAD_LEFT,
        "right": SVG_W - PAD_RIGHT,
        "top": PAD_TOP,
        "bottom": bottom,
        "ticks": ticks,
        "x_label": {"x": PAD_LEFT + inner_w / 2, "y": SVG_H - 8},
        "y_label": {"x": 14, "y": PAD_TOP + inner_h / 2},
        "failed": sum(1 for p in points if not p["passed"]),
    }


def submission(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        data = probe_report_page(submission_id=pk, user=request.user)
    except ProbeReportNotFound as exc:
        raise Http404(str(exc)) from exc
    report = data["report"]
    entry = data["submission"]
    runs = data["runs"]
    context: dict[str, Any] = {
        **data,
        # The run this page follows live until its report appears.
        "live_run": runs[0] if not report and runs and runs[0].status in ACTIVE_STATUSES else None,
        "can_choose": bool(
            report
            and not entry.board_choice
            and request.user.is_authenticated
            and (entry.owner_id == request.user.pk or request.user.is_staff)
        ),
    }
    if report:
        metrics = report["metrics"]
        histogram = metrics["failure_mode_histogram"]
        top = max(histogram.values(), default=0)
        context.update(
            metrics=metrics,
            overall=metrics["overall"],
            histogram=[
                {"mode": k, "count": v, "pct": round(100 * v / top, 1) if top else 0}
                for k, v in histogram.items()
            ],
            scatter=_scatter(report["observability"], report["cases"]),
            observability=report["observability"],
            agreement=report["agreement"],
            ranked_categories=[
                {
                    "category": r["category"],
                    **metrics["by_category"][r["category"]],
                    "agreement": ((report["agreement"] or {}).get("by_category") or {}).get(
                        r["category"]
                    ),
                }
                for r in metrics["category_ranking"]
            ],
        )
    return render(request, "probes/submission.html", context)


@login_required
def choose(request: HttpRequest, pk: int) -> HttpResponse:
    if request.method != "POST":
        return redirect("probes:submission", pk=pk)
    try:
        entry = probe_submission(submission_id=pk, user=request.user)
    except ProbeReportNotFound as exc:
        raise Http404(str(exc)) from exc
    try:
        probe_submission_choose(user=request.user, submission=entry)
    except ProbeChoiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request, f"Submission #{entry.pk} now represents {entry.model_name} on its boards."
        )
    return redirect("probes:submission", pk=pk)


def report_json(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        report = probe_report(submission_id=pk, user=request.user)
    except ProbeReportNotFound as exc:
        raise Http404(str(exc)) from exc
    response = JsonResponse(report, json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="probe-report-{pk}.json"'
    return response


def report_md(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        report = probe_report(submission_id=pk, user=request.user)
    except ProbeReportNotFound as exc:
        raise Http404(str(exc)) from exc
    text = report_markdown(report) + "\n" + board_markdown(report)
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="probe-report-{pk}.md"'
    return response


urlpatterns = [
    path("", leaderboard, name="leaderboard"),
    path("submit/", submit, name="submit"),
    path("submissions/<int:pk>/", submission, name="submission"),
    path("submissions/<int:pk>/choose/", choose, name="choose"),
    path("submissions/<int:pk>/report.json", report_json, name="report-json"),
    path("submissions/<int:pk>/report.md", report_md, name="report-md"),
]
