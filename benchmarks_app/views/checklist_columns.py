"""The checklist board's column specs: what each column shows (entry, papers, C, R, S, the
marks), its label and title, and the stored column it sorts by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Value
from django.db.models.functions import Lower, NullIf

from benchmarks_app.formatting import interval_text
from benchmarks_app.models import SubmissionKind
from benchmarks_app.selectors.checklist_boards import (
    ORDERING_COLUMNS,
)
from benchmarks_app.views.paired import board_mark_columns
from benchmarks_app.views.tables import Column, row_url


@dataclass(frozen=True)
class EntryColumn(Column):
    """The submission id, shown as ``#12``; downloads keep the number."""

    def display(self, value: Any) -> str:
        return f"#{value}" if value is not None else super().display(value)


@dataclass(frozen=True)
class KindColumn(Column):
    """``G`` / ``GAT`` shown by their labels; downloads keep the code."""

    def display(self, value: Any) -> str:
        return {"G": "G only", "GAT": "G/A/T"}.get(value, super().display(value))


BASELINE_BADGE = "baseline"
NOT_MEASURED = "— for a genuine-only entry: not measured"


def _genuine_only(row: Any) -> bool:
    return bool(row.get("kind") == SubmissionKind.GENUINE_ONLY)


def genuine_only_zero(row: Any) -> bool:
    """Whether the row's place is fixed by the challenge's rule: a genuine-only entry scores
    S = 0 and ranks below every entry with S > 0 (scoring.checklist.scores)."""
    return _genuine_only(row) and not row.get("s")


def leaderboard_columns(*, my_team_id: int | None, staff: bool) -> list[Column]:
    """Columns of the leaderboard; an entry links to its page only for its team and staff
    (the page shows per-question feedback, which other teams must not see)."""

    def entry_link(row: Any) -> str | None:
        if staff or (my_team_id is not None and row["team_id"] == my_team_id):
            return row_url("checklist:submission-detail", row["submission"])
        return None

    # Rank, team and S come first, so that on a phone they stay in view while the other
    # columns scroll (site.css, ``table.board``).
    return [
        Column("team", "Team"),
        Column("s", "S", kind="float", title="Overall score: C_G · C_A · (1 - R) · C_T"),
        Column(
            "is_baseline",
            "Baseline",
            sortable=False,
            value=lambda row: BASELINE_BADGE if row["is_baseline"] else "",
            title="A reference entrant of the organizers, ranked like any team",
            detail=True,
        ),
        Column(
            "method_name",
            "Method",
            link=lambda row: row["method_url"] or None,
            title="The method behind the entry, as the team described it",
            detail=True,
        ),
        EntryColumn("submission", "Entry", link=entry_link),
        KindColumn("kind", "Papers", title="G only: a genuine paper; G/A/T: a full triplet"),
        Column("c_g", "C_G", kind="float", title="Correctness on the genuine paper", detail=True),
        # A genuine-only entry has no A and T papers: C_A, C_T and R are not measured (its
        # S = 0 by the challenge's rule), so they show "—", not the 0, 0 and 1 stored for S.
        Column(
            "c_a",
            "C_A",
            kind="float",
            value=lambda row: None if _genuine_only(row) else row["c_a"],
            title=f"Correctness on the adversarial paper ({NOT_MEASURED})",
            detail=True,
        ),
        Column(
            "c_t",
            "C_T",
            kind="float",
            value=lambda row: None if _genuine_only(row) else row["c_t"],
            title=f"Correctness on the truth-adversarial paper ({NOT_MEASURED})",
            detail=True,
        ),
        Column(
            "r",
            "R",
            kind="float",
            value=lambda row: None if _genuine_only(row) else row["r"],
            title="Share of A's answers where the judge's verdict matches whether A agrees with T "
            f"({NOT_MEASURED})",
            detail=True,
        ),
        Column(
            "s_ci",
            "95% CI",
            sortable=False,
            value=lambda row: interval_text(row["ci_low"], row["ci_high"]),
            title="95% bootstrap interval of S, resampling the 15 questions (2,000 resamples, "
            "computed when the score was written)",
        ),
        *board_mark_columns("entries", rule_fixed=genuine_only_zero),
        Column("created_at", "Submitted", kind="datetime", detail=True),
    ]


# Column key → the stored row's column it sorts by: the API's, named as the page's columns.
BOARD_ORDERING: dict[str, Any] = {
    **{key: column for key, column in ORDERING_COLUMNS.items() if key != "rank"},
    "method_name": NullIf(Lower("method_name"), Value("")),
    "submission": "submission_id",
    "kind": "kind",
}
