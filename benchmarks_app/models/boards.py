"""Derived board rows of the probe and checklist boards (the audit's are ``AuditBoardRow``).

One row per entrant and board, rewritten when an entrant's run ends, its chosen entry
changes, or the board's phase or release changes: a board page is then one indexed query,
whatever the number of entrants. Rows are derived from appended results and can always be
rebuilt from them.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from benchmarks_app.models.checklist import Challenge, ChecklistScore, ChecklistSubmission, Team
from benchmarks_app.models.phases import Phase
from benchmarks_app.models.probes import ProbeRunReport, ProbeSuite, ResponseSubmission
from benchmarks_app.models.runs import EvaluationRun


class BoardRowFields(models.Model):
    position = models.PositiveIntegerField(default=0, help_text="Order on the board, from 1.")
    rank = models.PositiveIntegerField(null=True, blank=True)
    rank_low = models.PositiveIntegerField(null=True, blank=True)
    rank_high = models.PositiveIntegerField(null=True, blank=True)
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

    class Meta:
        abstract = True


class ProbeBoardRow(BoardRowFields):
    suite = models.ForeignKey(ProbeSuite, on_delete=models.CASCADE, related_name="board_rows")
    suite_version = models.CharField(max_length=64)
    phase = models.ForeignKey(
        Phase, null=True, blank=True, on_delete=models.CASCADE, related_name="probe_board_rows"
    )
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

    class Meta:
        ordering = ["suite", "suite_version", "phase", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["suite", "suite_version", "model_name"],
                condition=models.Q(phase__isnull=True),
                name="uniq_probe_board_row",
            ),
            models.UniqueConstraint(
                fields=["suite", "suite_version", "phase", "model_name"],
                condition=models.Q(phase__isnull=False),
                name="uniq_probe_phase_board_row",
            ),
        ]
        indexes = [
            models.Index(fields=["suite", "suite_version", "phase", "position"]),
            models.Index(fields=["suite", "suite_version", "phase", "pass_rate"]),
            models.Index(fields=["suite", "suite_version", "phase", "model_name"]),
        ]

    def __str__(self) -> str:
        return f"{self.suite} {self.suite_version[:8]}: {self.model_name}"


class ChecklistBoardRow(BoardRowFields):
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="board_rows")
    phase = models.ForeignKey(
        Phase, null=True, blank=True, on_delete=models.CASCADE, related_name="checklist_board_rows"
    )
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

    class Meta:
        ordering = ["challenge", "phase", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["challenge", "team"],
                condition=models.Q(phase__isnull=True),
                name="uniq_checklist_board_row",
            ),
            models.UniqueConstraint(
                fields=["challenge", "phase", "team"],
                condition=models.Q(phase__isnull=False),
                name="uniq_checklist_phase_board_row",
            ),
        ]
        indexes = [
            models.Index(fields=["challenge", "phase", "position"]),
            models.Index(fields=["challenge", "phase", "c_g"]),
            models.Index(fields=["challenge", "phase", "s"]),
            models.Index(fields=["challenge", "phase", "submitted_at"]),
            models.Index(fields=["challenge", "phase", "team_sort"]),
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

    def __str__(self) -> str:
        return self.board
