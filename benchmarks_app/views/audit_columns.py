"""Audit boards' column specs: what each column of the board, the incomplete entries' table
and a scanner's report shows, its label and title, and the stored column it sorts by."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.db.models import F, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Lower, NullIf

from benchmarks_app.formatting import percent_interval_text
from benchmarks_app.selectors.audit_boards import AUDIT_ORDERING_COLUMNS
from benchmarks_app.views.paired import BOARD_MARK_KEYS, board_mark_columns
from benchmarks_app.views.tables import Column, row_url


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
    *board_mark_columns("scanners", tie_key="tied_with_above"),
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
    *(c for c in BOARD_COLUMNS[1:] if c.key not in ("repos", "ci", *BOARD_MARK_KEYS)),
]

REPORT_COLUMNS = [
    Column("repo", "Repo"),
    *(c for c in LEADERBOARD_COLUMNS if c.key not in ("scanner", "repos")),
]


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
