"""The audit board's rows: one scanner's row on the board of one (release, judge, phase), a
derived table with its order, span and metric columns (and the functions that compute them,
which migrations 0022 and 0023 also call). The releases and scanners it points to are in
:mod:`benchmarks_app.models.audit` (named by string here, so that module can re-export these
names without a circular import)."""

from __future__ import annotations

from typing import Any

from django.db import models

from benchmarks_app.models.common import (
    BoardRowQuerySet,
    phase_key_field,
)
from scoring.audit.board import RANK_DIGITS

# The metrics of a board row kept as columns (sortable by index), from its metrics document.
METRIC_COLUMNS = (
    "truth",
    "scan",
    "qa",
    "tp",
    "partial",
    "fp",
    "fn",
    "precision",
    "recall",
    "precision_with_partial",
    "recall_with_partial",
)


def audit_metric_columns(metrics: dict[str, Any]) -> dict[str, float | None]:
    """A board row's metric columns from its metrics document (a missing or non-numeric key:
    null, which sorts last)."""
    out: dict[str, float | None] = {}
    for key in METRIC_COLUMNS:
        value = metrics.get(key)
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        out[key] = float(value) if numeric and value is not None else None
    return out


class AuditBoardRow(models.Model):
    """One scanner's row on the board of one (release, judge), written when a run ends.

    A derived table, rebuilt from the appended run results whenever a run of the board ends
    (``services.audit.boards``), so that a board page or API response is one query and its
    interval is computed once, not per request. ``judge`` is the board's judge key:
    ``offline``, ``openai:MODEL`` or ``replay:DIR``. Ranked rows (complete on every repo of
    the release) get ``rank``/``rank_low``/``rank_high`` when read
    (``selectors.board_marks``); incomplete rows have none.
    """

    release = models.ForeignKey(
        "benchmarks_app.DatasetRelease", on_delete=models.CASCADE, related_name="board_rows"
    )
    judge = models.CharField(max_length=300)
    # None: the release's board over every run; else the board of one phase's runs.
    phase = models.ForeignKey(
        "benchmarks_app.Phase",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="audit_board_rows",
    )
    phase_key = phase_key_field()
    scanner = models.ForeignKey(
        "benchmarks_app.Scanner", on_delete=models.CASCADE, related_name="board_rows"
    )
    # The board's order (ascending is better; see ``selectors.board_marks``): ranked rows
    # first (F1+, F1, name), then incomplete ones (most repos first). Places and ranks are
    # counted from these when read, not stored.
    sort_group = models.PositiveSmallIntegerField(default=0)
    sort_repos = models.IntegerField(default=0)
    sort_a = models.FloatField(default=0.0)
    sort_b = models.FloatField(default=0.0)
    sort_name = models.CharField(max_length=400, blank=True, default="")
    # The span the rank range is computed from (null: not ranked).
    span_low = models.FloatField(null=True, blank=True)
    span_high = models.FloatField(null=True, blank=True)
    exact = models.BooleanField(default=False)
    run_ids = models.JSONField(default=list, blank=True)
    # The repo results the row sums (their ids): its interval is recomputed only when they
    # change, so rows of other scanners keep theirs when one scanner's run ends.
    repo_result_ids = models.JSONField(default=list, blank=True)
    repos_evaluated = models.PositiveIntegerField(default=0)
    repos_total = models.PositiveIntegerField(default=0)
    is_complete = models.BooleanField(default=False)
    metrics = models.JSONField(default=dict, blank=True)
    f1_with_partial = models.FloatField(null=True, blank=True)
    # The metrics' F1, the board's second sort key, as a column: re-ranking a board reads it
    # for every row, and parsing every row's metrics document would cost more than the rest.
    f1 = models.FloatField(null=True, blank=True)
    # The metrics a board sorts by, as columns of their own (``METRIC_COLUMNS``): sorting
    # 100,000 rows by a key of the metrics document parsed every document (0.4 s).
    truth = models.FloatField(null=True, blank=True)
    scan = models.FloatField(null=True, blank=True)
    qa = models.FloatField(null=True, blank=True)
    tp = models.FloatField(null=True, blank=True)
    partial = models.FloatField(null=True, blank=True)
    fp = models.FloatField(null=True, blank=True)
    fn = models.FloatField(null=True, blank=True)
    precision = models.FloatField(null=True, blank=True)
    recall = models.FloatField(null=True, blank=True)
    precision_with_partial = models.FloatField(null=True, blank=True)
    recall_with_partial = models.FloatField(null=True, blank=True)
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    ci_level = models.FloatField(null=True, blank=True)
    ci_resamples = models.PositiveIntegerField(null=True, blank=True)
    ci_seed = models.IntegerField(null=True, blank=True)
    tied_with_above = models.BooleanField(default=False)
    computed_at = models.DateTimeField(auto_now=True)
    # The paired rule's marks (scoring.stats.paired), written by a separate step after the
    # board changes; null until then.
    paired_rank_low = models.PositiveIntegerField(null=True, blank=True)
    paired_rank_high = models.PositiveIntegerField(null=True, blank=True)
    paired_tied = models.BooleanField(null=True, blank=True)
    # Counted when read, not stored: set by ``selectors.board_marks.attach_marks``.
    position: int | None
    rank: int | None
    rank_low: int | None
    rank_high: int | None

    objects = BoardRowQuerySet.as_manager()

    class Meta:
        ordering = [
            "release",
            "judge",
            "phase_key",
            "sort_group",
            "sort_repos",
            "sort_a",
            "sort_b",
            "sort_name",
            "id",
        ]
        constraints = [
            # One row per scanner and board; also the index a run's end finds its row by
            # (a partial index on `phase IS NULL` is no use to a `phase_key = 0` filter).
            models.UniqueConstraint(
                fields=["release", "judge", "phase_key", "scanner"],
                name="uniq_audit_board_row",
            ),
        ]
        indexes = [
            models.Index(
                fields=[
                    "release",
                    "judge",
                    "phase_key",
                    "sort_group",
                    "sort_repos",
                    "sort_a",
                    "sort_b",
                    "sort_name",
                    "id",
                ],
                name="audit_board_order",
            ),
            models.Index(
                fields=["release", "judge", "phase_key", "span_low"], name="audit_board_low"
            ),
            # The board's stamp (rows, last written), which caches read: an index, not rows.
            models.Index(
                fields=["release", "judge", "phase_key", "computed_at"], name="audit_board_written"
            ),
            *(
                models.Index(
                    fields=["release", "judge", "phase_key", column],
                    name=f"audit_board_{column}"[:30],
                )
                for column in METRIC_COLUMNS
            ),
            models.Index(
                fields=["release", "judge", "phase_key", "span_high"], name="audit_board_high"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.release} / {self.judge}: {self.scanner}"


# A missing number sorts after every number (as ``scoring.audit.board`` orders it).
MISSING_LAST = 1e300


def name_key(name: str) -> str:
    """A name as a sort column that orders by code point under any database collation (the
    hex of its UTF-8 bytes), as the board's in-memory ranking orders names."""
    return name.encode().hex()


def audit_board_sort_fields(
    *,
    scanner_name: str,
    is_complete: bool,
    repos_evaluated: int,
    f1_with_partial: float | None,
    f1: float | None,
    ci_low: float | None,
    ci_high: float | None,
) -> dict[str, Any]:
    """The order and span columns of an audit board row (``scoring.audit.board.order_board``'s
    order: complete rows by F1+, F1, name; then the others by repos, F1+, F1, name)."""

    def number(value: float | None) -> float:
        return -round(value, RANK_DIGITS) if value is not None else MISSING_LAST

    fields: dict[str, Any] = {
        "sort_group": 0 if is_complete else 1,
        "sort_repos": 0 if is_complete else -int(repos_evaluated),
        "sort_a": number(f1_with_partial),
        "sort_b": number(f1),
        "sort_name": name_key(scanner_name),
        "exact": False,
        "span_low": None,
        "span_high": None,
    }
    if is_complete:
        value = f1_with_partial or 0.0
        has_ci = ci_low is not None and ci_high is not None
        low = ci_low if has_ci else value
        high = ci_high if has_ci else value
        fields["span_low"], fields["span_high"] = min(low, value), max(high, value)  # type: ignore[type-var]
    return fields
