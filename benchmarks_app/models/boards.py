"""Derived board rows of the probe and checklist boards (the audit's are ``AuditBoardRow``).

One row per entrant and board, rewritten when an entrant's run ends, its chosen entry
changes, or the board's phase or release changes: a board page is then one indexed query,
whatever the number of entrants. Rows are derived from appended results and can always be
rebuilt from them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from benchmarks_app.models.audit_board import name_key
from benchmarks_app.models.checklist import Challenge, ChecklistScore, ChecklistSubmission, Team
from benchmarks_app.models.common import BoardRowQuerySet, phase_key_field
from benchmarks_app.models.phases import Phase
from benchmarks_app.models.probes import ProbeRunReport, ProbeSuite, ResponseSubmission
from benchmarks_app.models.runs import EvaluationRun


class BoardRowFields(models.Model):
    # The board's order, ascending is better (``selectors.board_marks``): places and ranks
    # are counted from it when read, not stored.
    sort_a = models.FloatField(default=0.0)
    sort_b = models.FloatField(default=0.0)
    # The span the rank range is computed from (null: not ranked, or an exact value).
    span_low = models.FloatField(null=True, blank=True)
    span_high = models.FloatField(null=True, blank=True)
    exact = models.BooleanField(default=False)
    tied = models.BooleanField(default=False)
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    is_baseline = models.BooleanField(default=False)
    method_name = models.CharField(max_length=100, blank=True)
    method_description = models.CharField(max_length=500, blank=True)
    method_url = models.URLField(max_length=500, blank=True)
    computed_at = models.DateTimeField(auto_now=True)
    # The paired rule's marks (scoring.stats.paired), written by a separate step after the
    # board changes; null until then (or for rows beyond its reach): pages show the
    # unpaired marks meanwhile.
    paired_rank_low = models.PositiveIntegerField(null=True, blank=True)
    paired_rank_high = models.PositiveIntegerField(null=True, blank=True)
    paired_tied = models.BooleanField(null=True, blank=True)
    # Counted when read, not stored: set by ``selectors.board_marks.attach_marks``.
    position: int | None
    rank: int | None
    rank_low: int | None
    rank_high: int | None

    class Meta:
        abstract = True


class ProbeBoardRow(BoardRowFields):
    suite = models.ForeignKey(ProbeSuite, on_delete=models.CASCADE, related_name="board_rows")
    suite_version = models.CharField(max_length=64)
    # No index of its own: the indexes below lead with (suite, version, phase_key), and one
    # on the phase alone made SQLite answer `phase IS NULL` with it and sort all 100,000 rows
    # of the board of all entries to list its boards (47 ms). A phase's deletion scans the
    # rows.
    phase = models.ForeignKey(
        Phase,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="probe_board_rows",
        db_index=False,
    )
    phase_key = phase_key_field()
    model_name = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    submission = models.ForeignKey(
        ResponseSubmission, on_delete=models.CASCADE, related_name="board_rows"
    )
    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="+")
    report = models.ForeignKey(ProbeRunReport, on_delete=models.CASCADE, related_name="+")
    resilience_index = models.FloatField(null=True, blank=True)
    pass_rate = models.FloatField(null=True, blank=True)
    severity_weighted_pass_rate = models.FloatField(null=True, blank=True)
    high_stakes_failure_rate = models.FloatField(null=True, blank=True)
    agreement_accuracy = models.FloatField(null=True, blank=True)
    agreement_kappa = models.FloatField(null=True, blank=True)
    evaluated = models.PositiveIntegerField(null=True, blank=True)
    scored_at = models.DateTimeField()
    # Models without a resilience index come last; then by resilience, pass rate, name.
    sort_group = models.PositiveSmallIntegerField(default=0)
    sort_name = models.CharField(max_length=400, blank=True, default="")

    objects = BoardRowQuerySet.as_manager()

    class Meta:
        ordering = [
            "suite",
            "suite_version",
            "phase_key",
            "sort_group",
            "sort_a",
            "sort_b",
            "sort_name",
            "id",
        ]
        constraints = [
            # One row per model and board; also the index a run's end finds its row by.
            models.UniqueConstraint(
                fields=["suite", "suite_version", "phase_key", "model_name"],
                name="uniq_probe_board_row",
            ),
        ]
        indexes = [
            models.Index(
                fields=[
                    "suite",
                    "suite_version",
                    "phase_key",
                    "sort_group",
                    "sort_a",
                    "sort_b",
                    "sort_name",
                    "id",
                ],
                name="probe_board_order",
            ),
            models.Index(
                fields=["suite", "suite_version", "phase_key", "span_low"], name="probe_board_low"
            ),
            models.Index(
                fields=["suite", "suite_version", "phase_key", "computed_at"],
                name="probe_board_written",
            ),
            models.Index(
                fields=["suite", "suite_version", "phase_key", "span_high"], name="probe_board_high"
            ),
            # A board's latest report, which puts a suite's newest version first.
            models.Index(
                fields=["suite", "suite_version", "phase_key", "scored_at"],
                name="probe_board_scored",
            ),
            models.Index(fields=["suite", "suite_version", "phase_key", "pass_rate"]),
            models.Index(fields=["suite", "suite_version", "phase_key", "model_name"]),
        ]

    def __str__(self) -> str:
        return f"{self.suite} {self.suite_version[:8]}: {self.model_name}"


class ChecklistBoardRow(BoardRowFields):
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="board_rows")
    phase = models.ForeignKey(
        Phase, null=True, blank=True, on_delete=models.CASCADE, related_name="checklist_board_rows"
    )
    phase_key = phase_key_field()
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="board_rows")
    # The team's name, casefolded: ``?ordering=team`` reads an index instead of sorting.
    team_sort = models.CharField(max_length=100, blank=True)
    submission = models.ForeignKey(
        ChecklistSubmission, on_delete=models.CASCADE, related_name="board_rows"
    )
    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="+")
    score = models.ForeignKey(ChecklistScore, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=3)
    c_g = models.FloatField()
    c_a = models.FloatField()
    c_t = models.FloatField()
    r = models.FloatField()
    s = models.FloatField()
    submitted_at = models.DateTimeField()
    # The submission's time in microseconds: S, C_G, the earlier submission, its id.
    sort_time = models.BigIntegerField(default=0)

    objects = BoardRowQuerySet.as_manager()

    class Meta:
        ordering = [
            "challenge",
            "phase_key",
            "sort_a",
            "sort_b",
            "sort_time",
            "submission_id",
            "id",
        ]
        constraints = [
            # One row per team and board; also the index a run's end finds its row by.
            models.UniqueConstraint(
                fields=["challenge", "phase_key", "team"], name="uniq_checklist_board_row"
            ),
        ]
        indexes = [
            models.Index(
                fields=[
                    "challenge",
                    "phase_key",
                    "sort_a",
                    "sort_b",
                    "sort_time",
                    "submission",
                    "id",
                ],
                name="checklist_board_order",
            ),
            models.Index(fields=["challenge", "phase_key", "span_low"], name="checklist_board_low"),
            models.Index(
                fields=["challenge", "phase_key", "computed_at"], name="checklist_board_written"
            ),
            models.Index(
                fields=["challenge", "phase_key", "span_high"], name="checklist_board_high"
            ),
            models.Index(
                fields=["challenge", "phase_key", "exact", "s"], name="checklist_board_exact"
            ),
            models.Index(fields=["challenge", "phase_key", "c_g"]),
            models.Index(fields=["challenge", "phase_key", "s"]),
            models.Index(fields=["challenge", "phase_key", "submitted_at"]),
            models.Index(fields=["challenge", "phase_key", "team_sort"]),
        ]

    def __str__(self) -> str:
        return f"{self.challenge} / {self.team}"


class PairedRefresh(models.Model):
    """A board whose paired marks wait to be recomputed (``services.paired``).

    One row per board key: however many runs end on a board meanwhile, one refresh runs;
    the refresh deletes the row before it reads the board, so a change after that asks for
    another.
    """

    board = models.CharField(max_length=400, unique=True)
    requested_at = models.DateTimeField(auto_now_add=True)
    # When its task went to the queue; null while that is owed (the broker refused it): the
    # sweeper sends it then (``paired_owed_send``).
    enqueued_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.board


class PairedBoardSummary(models.Model):
    """What the last paired refresh of a board did, for the legend under the board: how many
    pairs it tested (its Holm correction's family), how many it split, and whether the exact
    test gated them. One row per board key, replaced by each refresh."""

    board = models.CharField(max_length=400, unique=True)
    ranked = models.PositiveIntegerField(default=0)
    marked = models.PositiveIntegerField(default=0)
    tested_pairs = models.PositiveIntegerField(default=0)
    split_pairs = models.PositiveIntegerField(default=0)
    correction = models.CharField(max_length=20, default="holm")
    exact_test = models.BooleanField(default=False)
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.board}: {self.tested_pairs} pairs"


def _span(value: float, low: float | None, high: float | None) -> tuple[float, float]:
    # A missing bound is the value; the interval widened to contain it (``board_ranks``).
    low = value if low is None else low
    high = value if high is None else high
    return min(low, value), max(high, value)


def probe_board_sort_fields(
    *,
    model_name: str,
    resilience_index: float | None,
    pass_rate: float | None,
    ci_low: float | None,
    ci_high: float | None,
) -> dict[str, Any]:
    """The order and span columns of a probe board row."""
    fields: dict[str, Any] = {
        "sort_group": 1 if resilience_index is None else 0,
        "sort_a": -(resilience_index or 0.0),
        "sort_b": -(pass_rate or 0.0),
        "sort_name": name_key(model_name),
        "exact": False,
        "span_low": None,
        "span_high": None,
    }
    if resilience_index is not None:
        fields["span_low"], fields["span_high"] = _span(resilience_index, ci_low, ci_high)
    return fields


def checklist_board_sort_fields(
    *,
    s: float,
    c_g: float,
    submitted_micros: int,
    genuine_only: bool,
    ci_low: float | None,
    ci_high: float | None,
) -> dict[str, Any]:
    """The order and span columns of a checklist board row. S of an entry of the genuine
    paper alone is 0 by definition: exact, with no span."""
    exact = genuine_only and s == 0
    low, high = (None, None) if exact else _span(s, ci_low, ci_high)
    return {
        "sort_a": -s,
        "sort_b": -c_g,
        "sort_time": submitted_micros,
        "exact": exact,
        "span_low": low,
        "span_high": high,
    }
