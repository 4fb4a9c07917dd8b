"""The home page: the three leaderboards side by side, top rows of each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse

from benchmarks_app.models import Benchmark
from benchmarks_app.selectors.leaderboards import benchmark_summaries, leaderboard_rows
from benchmarks_app.views.tables import Column, SortableTable, infer_columns

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


# Columns of each leaderboard on the home page (the full pages show more). A benchmark with
# no entry here gets columns inferred from its rows.
HOME_COLUMNS: dict[str, list[Column]] = {
    Benchmark.AUDIT: [
        Column("scanner", "Scanner", link=_link("audit:scanner", "scanner")),
        Column("repos", "Repos", kind="int"),
        Column("recall", "Recall", kind="pct", title="Share of true findings found"),
        Column("precision", "Precision", kind="pct", title="Share of reported findings true"),
        Column("f1", "F1", kind="float"),
        Column("f1_with_partial", "F1 (partial)", kind="float", title="Partial matches count"),
    ],
    Benchmark.PROBES: [
        Column("model", "Model", link=_link("probes:submission", "submission_id")),
        Column("suite", "Suite"),
        Column("resilience_index", "Resilience", kind="float"),
        Column("pass_rate", "Pass rate", kind="pct"),
        Column("high_stakes_failure_rate", "High-stakes failures", kind="pct"),
        Column("evaluated", "Probes", kind="int"),
    ],
    Benchmark.CHECKLIST: [
        Column("team", "Team"),
        Column("s", "S", kind="float", title="Overall score"),
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
    Benchmark.CHECKLIST: "No assessor has been scored yet. Join a team and submit a paper "
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


def _board(request: HttpRequest, summary: Any) -> Board:
    rows = leaderboard_rows(summary.slug, user=request.user)
    columns = HOME_COLUMNS.get(summary.slug) or infer_columns(rows or [])
    table = SortableTable(
        request,
        rows,
        columns,
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


def home(request: HttpRequest) -> HttpResponse:
    boards = [_board(request, summary) for summary in benchmark_summaries(request.user)]
    for board in boards:
        if (download := board.table.download()) is not None:
            return download
    return render(request, "home.html", {"boards": boards, "top_n": TOP_N})
