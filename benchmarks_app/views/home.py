"""The home page: the three leaderboards side by side, top rows of each."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse

from benchmarks_app.models import Benchmark
from benchmarks_app.selectors.audit_boards import board_row, board_row_queryset, resolve_board
from benchmarks_app.selectors.board_marks import (
    AUDIT_SHAPE,
    CHECKLIST_SHAPE,
    PROBE_SHAPE,
    BoardShape,
    light_fields,
)
from benchmarks_app.selectors.checklist import default_challenge
from benchmarks_app.selectors.checklist_boards import board_row_dict, checklist_board
from benchmarks_app.selectors.leaderboards import benchmark_summaries
from benchmarks_app.selectors.probe_boards import ROW_COLUMNS, probe_board_order, probe_board_rows
from benchmarks_app.selectors.probe_boards import board_row as probe_board_row
from benchmarks_app.views import audit_columns, checklist_columns, probes_columns
from benchmarks_app.views.board_tables import BoardTable
from benchmarks_app.views.tables import Column, SortableTable

TOP_N = 5


def _link(name: str, key: str) -> Any:
    def link(row: Any) -> str | None:
        value = row.get(key) if isinstance(row, dict) else getattr(row, key, None)
        if value is None:
            return None
        try:
            return reverse(name, args=[value])
        except NoReverseMatch:
            return None

    return link


def _pick(columns: Sequence[Column], *keys: str) -> list[Column]:
    """The board page's own columns, so that a metric reads the same on both pages."""
    by_key = {c.key: c for c in columns}
    return [by_key[key] for key in keys]


# Columns of each leaderboard on the home page (the full pages show more).
HOME_COLUMNS: dict[str, list[Column]] = {
    Benchmark.AUDIT: [
        Column("scanner", "Scanner", link=_link("audit:scanner", "scanner")),
        *_pick(
            audit_columns.LEADERBOARD_COLUMNS, "repos", "f1_with_partial", "precision", "recall"
        ),
    ],
    Benchmark.PROBES: [
        Column("model", "Model", link=_link("probes:submission", "submission_id")),
        Column("suite", "Suite"),
        *_pick(
            probes_columns.LEADERBOARD_COLUMNS,
            "resilience_index",
            "pass_rate",
            "high_stakes_failure_rate",
            "evaluated",
        ),
    ],
    Benchmark.CHECKLIST: [
        Column("team", "Team"),
        Column("s", "S", kind="float", title="Overall score: C_G · C_A · (1 - R) · C_T"),
        Column("c_g", "C_G", kind="float", title="Correctness on genuine papers"),
        Column("c_a", "C_A", kind="float", title="Correctness on adversarial papers"),
        Column("c_t", "C_T", kind="float", title="Correctness on truth-adversarial papers"),
        Column("r", "R", kind="float", title="Robustness"),
    ],
}

EMPTY_MESSAGES: dict[str, str] = {
    Benchmark.AUDIT: "No scanner has been scored yet. Upload a scanner's results on the "
    "Audit page to see it ranked here.",
    Benchmark.PROBES: "No model has been scored yet. Upload a model's probe responses on "
    "the Probes page to see it ranked here.",
    Benchmark.CHECKLIST: "No team has been scored yet. Join a team and submit a paper "
    "or a G/A/T triplet on the Checklist page.",
}


@dataclass(frozen=True)
class Board:
    slug: str
    name: str
    description: str
    page_url: str
    run_count: int
    active_runs: int
    table: SortableTable


@dataclass(frozen=True)
class BoardRows:
    """A board's stored rows, how the page's columns sort them and how a row is read."""

    queryset: QuerySet[Any] | None
    ordering: Mapping[str, Any]
    row: Callable[[Any], Any]
    shape: BoardShape
    order: Sequence[Any] | None = None
    fields: Sequence[str] = ()


def _audit_rows(request: HttpRequest) -> BoardRows:
    # The official board's ranked rows (scanners evaluated on every repo of the release);
    # scores are public, so there is nothing to hide from the viewer.
    board = resolve_board()
    if board is None:
        return BoardRows(None, audit_columns.BOARD_ORDERING, board_row, AUDIT_SHAPE)
    rows = board_row_queryset(board).filter(sort_group=0)
    return BoardRows(rows, audit_columns.BOARD_ORDERING, board_row, AUDIT_SHAPE)


def _probe_rows(request: HttpRequest) -> BoardRows:
    # Every suite, each ranked on its own (``rank`` restarts per suite), suite by suite.
    rows, order, _ = probe_board_order(probe_board_rows(user=request.user))
    return BoardRows(
        rows,
        probes_columns.BOARD_ORDERING,
        probe_board_row,
        PROBE_SHAPE,
        order=order,
        fields=(*ROW_COLUMNS, *light_fields(PROBE_SHAPE)),
    )


def _checklist_rows(request: HttpRequest) -> BoardRows:
    # The default challenge: teams of different challenges are never ranked together.
    board = checklist_board(challenge=default_challenge(None))
    return BoardRows(
        board.rows(),
        checklist_columns.BOARD_ORDERING,
        lambda stored: board_row_dict(stored, board=board),
        CHECKLIST_SHAPE,
    )


BOARD_ROWS: dict[str, Callable[[HttpRequest], BoardRows]] = {
    Benchmark.AUDIT: _audit_rows,
    Benchmark.PROBES: _probe_rows,
    Benchmark.CHECKLIST: _checklist_rows,
}


def _board(request: HttpRequest, summary: Any) -> Board:
    # Only the top rows are read, sorted in the database, whatever the number of entrants.
    rows = BOARD_ROWS[summary.slug](request)
    table = BoardTable(
        request,
        rows.queryset,
        HOME_COLUMNS[summary.slug],
        ordering=rows.ordering,
        row=rows.row,
        shape=rows.shape,
        board_order=rows.order,
        fields=rows.fields,
        prefix=summary.slug,
        limit=TOP_N,
        filename=f"{summary.slug}-leaderboard-top",
        empty_message=EMPTY_MESSAGES[summary.slug],
        table_id=f"home-{summary.slug}",
    )
    return Board(
        slug=summary.slug,
        name=summary.name,
        description=summary.description,
        page_url=f"/{summary.slug}/",
        run_count=summary.run_count,
        active_runs=summary.active_runs,
        table=table,
    )


def home(request: HttpRequest) -> HttpResponseBase:
    boards = [_board(request, summary) for summary in benchmark_summaries(request.user)]
    for board in boards:
        if (download := board.table.download()) is not None:
            return download
    return render(request, "home.html", {"boards": boards, "top_n": TOP_N})
