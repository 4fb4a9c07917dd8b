from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from benchmarks_app.models.common import (
    AppendOnlyModel,
    EntryMetadata,
    LineEndsTextField,
    TimeStampedModel,
)
from scoring.probes.rules import RuleError, validate_rule_regex


class ProbeSeverity(models.TextChoices):
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"
    CRITICAL = "critical", "Critical"


class ExpectedBehaviour(models.TextChoices):
    REFUSE = "refuse", "Refuse"
    COMPLY = "comply", "Comply"


class RuleKind(models.TextChoices):
    SAFE = "safe", "Safe signal"
    UNSAFE = "unsafe", "Unsafe signal"
    BOUNDARY = "boundary", "Refusal / boundary signal"


class HumanLabel(models.TextChoices):
    FULL_COMPLIANCE = "1_full_compliance", "Full compliance"
    FULL_REFUSAL = "2_full_refusal", "Full refusal"
    PARTIAL_REFUSAL = "3_partial_refusal", "Partial refusal"


class RefusalSignal(models.TextChoices):
    """What decides whether a response refuses (see :mod:`scoring.probes.refusal`)."""

    RULES = "rules", "Boundary rules"
    CLASSIFIER = "classifier", "Trained classifier"
    OPENAI = "openai", "LLM judge (openai)"


class ProbeSuite(TimeStampedModel):
    name = models.CharField(max_length=100, unique=True)
    description = LineEndsTextField(blank=True)
    source = models.CharField(max_length=300, blank=True)
    # Suites created before the signal was pluggable keep the rules; a new suite is given the
    # signal with the best held-out figures when it is imported (services.probes.refusal).
    refusal_signal = models.CharField(
        max_length=20, choices=RefusalSignal.choices, default=RefusalSignal.RULES
    )
    refusal_classifier = models.JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="This suite's own trained refusal classifier (JSON artefact); empty: the "
        "bundled one.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Probe(TimeStampedModel):
    suite = models.ForeignKey(ProbeSuite, on_delete=models.CASCADE, related_name="probes")
    probe_id = models.CharField(max_length=100)
    category = models.CharField(max_length=100, db_index=True)
    severity = models.CharField(
        max_length=10, choices=ProbeSeverity.choices, default=ProbeSeverity.MEDIUM
    )
    task = models.TextField(blank=True)
    input = models.TextField()
    failure_modes = models.JSONField(default=list, blank=True)
    expected = models.CharField(
        max_length=10, choices=ExpectedBehaviour.choices, default=ExpectedBehaviour.REFUSE
    )
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["suite", "id"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "probe_id"], name="uniq_probe_id_per_suite"),
        ]

    def __str__(self) -> str:
        return f"{self.suite}:{self.probe_id}"


class PatternRuleQuerySet(models.QuerySet["PatternRule"]):
    def active(self) -> PatternRuleQuerySet:
        return self.filter(active=True)


def validate_regex(value: str) -> None:
    """A rule's regex must compile with RE2 (linear-time matching) and never match emptily."""
    try:
        validate_rule_regex(value)
    except RuleError as exc:
        reason = str(exc)
        raise ValidationError(
            f"Regex: {reason[:1].upper()}{reason[1:]}", code="invalid_rule_regex"
        ) from exc


class PatternRule(TimeStampedModel):
    """A curated regex signal used by the heuristic probe scorer."""

    kind = models.CharField(max_length=10, choices=RuleKind.choices, db_index=True)
    label = models.CharField(max_length=100)
    regex = models.TextField(validators=[validate_regex])
    weight = models.FloatField(default=1.0)
    failure_mode = models.CharField(max_length=100, blank=True)
    active = models.BooleanField(default=True, db_index=True)
    description = LineEndsTextField(blank=True)

    # Every curation change, with who made it, shown in the admin.
    history = HistoricalRecords()

    objects = PatternRuleQuerySet.as_manager()

    class Meta:
        ordering = ["kind", "label"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "label"], name="uniq_pattern_rule_label"),
            models.CheckConstraint(
                condition=models.Q(weight__gte=0), name="pattern_rule_weight_gte_0"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.label}"


class ResponseSubmission(EntryMetadata, TimeStampedModel):
    """One model's responses to a probe suite."""

    suite = models.ForeignKey(ProbeSuite, on_delete=models.CASCADE, related_name="submissions")
    model_name = models.CharField(max_length=200, db_index=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    source_name = models.CharField(max_length=300, blank=True)
    phase = models.ForeignKey(
        "benchmarks_app.Phase",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="probe_submissions",
    )
    board_choice = models.BooleanField(
        default=False,
        help_text="The entry chosen to represent this model on its board (else the latest).",
    )
    is_baseline = models.BooleanField(
        default=False, help_text="A reference model: ranked like any other, shown with a badge."
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # A model's submissions to a suite (what a run's end re-reads for its board row).
            models.Index(fields=["suite", "model_name"], name="probe_submission_model"),
        ]

    def __str__(self) -> str:
        return f"{self.model_name} on {self.suite}"


class Response(TimeStampedModel):
    submission = models.ForeignKey(
        ResponseSubmission, on_delete=models.CASCADE, related_name="responses"
    )
    probe = models.ForeignKey(Probe, on_delete=models.CASCADE, related_name="responses")
    output = models.TextField()
    human_label = models.CharField(max_length=30, choices=HumanLabel.choices, blank=True)

    class Meta:
        ordering = ["submission", "probe"]
        constraints = [
            models.UniqueConstraint(fields=["submission", "probe"], name="uniq_response_per_probe"),
        ]

    def __str__(self) -> str:
        return f"{self.submission_id}:{self.probe_id}"


# --- Probe results -----------------------------------------------------------------------


class ProbeCaseResult(AppendOnlyModel):
    run = models.ForeignKey(
        "benchmarks_app.EvaluationRun", on_delete=models.CASCADE, related_name="probe_cases"
    )
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="case_results")
    probe = models.ForeignKey(Probe, on_delete=models.CASCADE, related_name="+")
    passed = models.BooleanField()
    risk_score = models.FloatField()
    weighted_risk = models.FloatField(db_index=True)
    boundary_or_refusal_signal = models.BooleanField(default=False)
    case = models.JSONField(help_text="The full CaseScore.")

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "response"], name="uniq_probe_case_per_run"),
        ]

    def __str__(self) -> str:
        return f"Run #{self.run_id}: probe #{self.probe_id} ({self.weighted_risk:.2f} risk)"


class ProbeRunReport(AppendOnlyModel):
    run = models.OneToOneField(
        "benchmarks_app.EvaluationRun", on_delete=models.CASCADE, related_name="probe_report"
    )
    submission = models.ForeignKey(
        ResponseSubmission, on_delete=models.CASCADE, related_name="reports"
    )
    metrics = models.JSONField(default=dict)
    observability = models.JSONField(null=True, blank=True)
    agreement = models.JSONField(null=True, blank=True)
    resilience_index = models.FloatField(null=True, db_index=True)
    pass_rate = models.FloatField(null=True)
    severity_weighted_pass_rate = models.FloatField(null=True)
    high_stakes_failure_rate = models.FloatField(null=True)
    # 95% bootstrap interval of the ranking metric (resampling probes), computed at the end
    # of the run: {"metric", "low", "high", "level", "resamples", "seed"}.
    ci = models.JSONField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Report of run #{self.run_id}"
