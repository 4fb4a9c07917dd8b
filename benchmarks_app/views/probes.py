"""Safety-probe boards: one per suite version (and phase), with the routes of the probes
namespace. The boards' column specs are in :mod:`probes_columns`, the submission form in
:mod:`probes_submit`, a submission's report pages in :mod:`probes_reports`."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import path, reverse
from django.utils.text import slugify

from benchmarks_app.models import Benchmark, Phase
from benchmarks_app.models.boards import ProbeBoardRow
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, light_fields
from benchmarks_app.selectors.judge_agreement import probe_board_agreement
from benchmarks_app.selectors.leaderboards import own_submissions
from benchmarks_app.selectors.phases import phase_dates
from benchmarks_app.selectors.probe_boards import (
    ROW_COLUMNS,
    ProbeReportNotFound,
    board_placed,
    board_row,
    own_probe_board_row_ids,
    probe_board_rows,
    probe_boards,
    probe_phase_for_board,
    probe_suite_phases,
)
from benchmarks_app.views.board_tables import BoardReading, BoardTable
from benchmarks_app.views.probes_columns import BOARD_ORDERING, LEADERBOARD_COLUMNS
from benchmarks_app.views.probes_reports import choose, report_json, report_md, submission
from benchmarks_app.views.probes_submit import submit
from benchmarks_app.views.tables import SortableTable

app_name = "probes"

MY_SUBMISSIONS_SHOWN = 10


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


def _unplaced_row(values: dict[str, Any]) -> dict[str, Any]:
    return board_row(values, placed=False)


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
    own = own_probe_board_row_ids(request.user)
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
                # A hidden phase's board shows a participant their own rows, never their
                # place among rows they cannot see: no rank column, range, tie or paired rank.
                row=board_row if whole else _unplaced_row,
                rank=whole,
                shape=PROBE_SHAPE,
                fields=(*ROW_COLUMNS, *light_fields(PROBE_SHAPE)),
                # A board the viewer sees whole: a page's places follow from its offset.
                places_from_offset=whole,
                whole_board=whole,
                # Each board sorts, pages and downloads on its own: ?<board>-sort=, -page=.
                prefix=slug,
                filename=f"probes-{slug}-leaderboard",
                table_id=f"probes-{slug}",
                reading=BoardReading(
                    noun="models",
                    value_key="resilience_index",
                    label_key="model",
                    mine=(lambda row: row.get("id") in own) if own else None,
                ),
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


urlpatterns = [
    path("", leaderboard, name="leaderboard"),
    path("submit/", submit, name="submit"),
    path("submissions/<int:pk>/", submission, name="submission"),
    path("submissions/<int:pk>/choose/", choose, name="choose"),
    path("submissions/<int:pk>/report.json", report_json, name="report-json"),
    path("submissions/<int:pk>/report.md", report_md, name="report-md"),
]
