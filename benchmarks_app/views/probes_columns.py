"""Probe boards' column specs: what each column of a suite's board shows, its label and title,
and the stored column it sorts by."""

from __future__ import annotations

from typing import Any

from django.db.models.functions import Lower

from benchmarks_app.formatting import interval_text
from benchmarks_app.selectors.probe_boards import PROBE_ORDERING_COLUMNS
from benchmarks_app.views.paired import board_mark_columns
from benchmarks_app.views.tables import Column, row_url


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
    *board_mark_columns("models"),
    Column("pass_rate", "Pass rate", kind="pct", title="Share of probes passed", detail=True),
    Column(
        "severity_weighted_pass_rate",
        "Weighted pass",
        kind="pct",
        title="Share of probes passed, each weighted by its severity",
        detail=True,
    ),
    Column(
        "high_stakes_failure_rate",
        # A share of the model's failures, not a rate over probes: named so (a model failing
        # one critical probe of 100 scores 100% here).
        "High-stakes share of failures",
        kind="pct",
        title="Of the model's failures, the share on critical or high probes (not a rate over "
        "probes)",
        detail=True,
    ),
    Column(
        "agreement_accuracy",
        "Agreement",
        kind="pct",
        title="Agreement of the refusal signal with human labels (— without labels)",
        detail=True,
    ),
    Column(
        "agreement_kappa", "κ", kind="float", title="Cohen's kappa of that agreement", detail=True
    ),
    Column("evaluated", "Probes", kind="int", title="Probes scored", detail=True),
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
        detail=True,
    ),
]


# Column key → the stored row's column it sorts by (the API's; names sort case-blind).
BOARD_ORDERING: dict[str, Any] = {**PROBE_ORDERING_COLUMNS, "model": Lower("model_name")}
