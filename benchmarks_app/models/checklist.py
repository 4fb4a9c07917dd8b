from __future__ import annotations

import secrets
import uuid
from pathlib import PurePosixPath
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import models
from simple_history.models import HistoricalRecords

from benchmarks_app.models.common import (
    AppendOnlyModel,
    EntryMetadata,
    LineEndsTextField,
    TimeStampedModel,
)
from scoring.checklist.questions import QUESTION_TITLES


class ChecklistQuestion(models.Model):
    """One of the 15 NeurIPS 2024 checklist questions (loaded by a data migration)."""

    number = models.PositiveSmallIntegerField(unique=True)
    title = models.CharField(max_length=200)
    question = LineEndsTextField()
    guidelines = LineEndsTextField(blank=True)

    # Every curation change, with who made it, shown in the admin.
    history = HistoricalRecords()

    class Meta:
        ordering = ["number"]

    def __str__(self) -> str:
        return f"{self.number}. {self.title}"

    @property
    def printed_title(self) -> str:
        """The question's name as the NeurIPS checklist prints it in papers: what pages, the
        API and the commands show (the extraction messages name it so too). ``title``, the
        checklist assistant's short name, stays what the judge is asked about."""
        return QUESTION_TITLES.get(self.number, self.title)


class Challenge(TimeStampedModel):
    name = models.CharField(max_length=200, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    description = LineEndsTextField(blank=True)
    is_open = models.BooleanField(default=True)
    daily_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Submissions per team per day; empty uses the setting."
    )
    total_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Submissions per team in all; empty uses the setting."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def new_invite_code() -> str:
    """72 random bits, URL-safe: unguessable, short enough to paste into a chat message."""
    return secrets.token_urlsafe(9)


class Team(TimeStampedModel):
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="teams")
    name = models.CharField(max_length=100)
    # A callable default also covers bulk_create, which skips save().
    invite_code = models.CharField(
        max_length=32,
        unique=True,
        default=new_invite_code,
        help_text="Shown to the team's members only; whoever has it can join the team.",
    )
    members: models.ManyToManyField[Any, Any] = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )
    is_internal = models.BooleanField(
        default=False,
        help_text="Maintainers' own team (judge checks): its entries never reach the public board.",
    )
    is_baseline = models.BooleanField(
        default=False, help_text="A reference entrant: ranked like any team, shown with a badge."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_teams",
        help_text="May remove members and rotate the invite code; the team's creator.",
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["challenge", "name"], name="uniq_team_name_per_challenge"
            ),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.invite_code:
            self.invite_code = new_invite_code()
        super().save(*args, **kwargs)

    def __str__(self) -> str:
        return self.name


class Membership(TimeStampedModel):
    """A user belongs to at most one team per challenge (``challenge`` mirrors the team's)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="memberships")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "challenge"], name="uniq_one_team_per_user_per_challenge"
            ),
        ]

    def save(self, *args: object, **kwargs: object) -> None:
        self.challenge_id = self.team.challenge_id
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}"


class SubmissionKind(models.TextChoices):
    GENUINE_ONLY = "G", "Genuine only"
    TRIPLET = "GAT", "G/A/T triplet"


class SubmissionStatus(models.TextChoices):
    RECEIVED = "received", "Received"
    EXTRACTED = "extracted", "Extracted"
    ASSESSING = "assessing", "Assessing"
    SCORED = "scored", "Scored"
    FAILED = "failed", "Failed"
    # Withdrawn by its team before assessment; its files are deleted.
    WITHDRAWN = "withdrawn", "Withdrawn"


class ChecklistSubmissionQuerySet(models.QuerySet["ChecklistSubmission"]):
    def counting_towards_quota(self) -> ChecklistSubmissionQuerySet:
        """Every accepted entry; only refused or withdrawn ones leave the count.

        Files refused at upload or extraction are never stored. A ``withdrawn`` submission
        (before assessment, so without a run) leaves the count; an accepted entry whose
        assessment failed (it has a run) keeps its slot, otherwise resuming it in the admin
        would make it count again and let the team go over its limit in between.
        """
        # EvaluationRun's module imports this one; look it up by name instead.
        run_model = apps.get_model("benchmarks_app", "EvaluationRun")
        accepted = models.Exists(
            run_model.objects.filter(checklist_submission=models.OuterRef("pk"))
        )
        gone = [SubmissionStatus.FAILED, SubmissionStatus.WITHDRAWN]
        return self.filter(~models.Q(status__in=gone) | accepted)


class ChecklistSubmission(EntryMetadata, TimeStampedModel):
    """A G paper alone, or a G/A/T triplet (the triplet group)."""

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="submissions")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="submissions")
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    kind = models.CharField(max_length=3, choices=SubmissionKind.choices)
    status = models.CharField(
        max_length=12, choices=SubmissionStatus.choices, default=SubmissionStatus.RECEIVED
    )
    label = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    phase = models.ForeignKey(
        "benchmarks_app.Phase",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="checklist_submissions",
    )
    board_choice = models.BooleanField(
        default=False,
        help_text="The team's chosen entry for its phase's public board.",
    )

    objects = ChecklistSubmissionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.team} #{self.pk} ({self.get_kind_display()})"


class PaperKind(models.TextChoices):
    GENUINE = "G", "Genuine"
    ADVERSARIAL = "A", "Adversarial"
    TRUTH = "T", "Truth-adversarial"


class SourceFormat(models.TextChoices):
    PDF = "pdf", "PDF"
    TEX = "tex", "LaTeX"
    ZIP = "zip", "LaTeX (zip)"
    CSV = "csv", "Assessed CSV"


def paper_upload_path(instance: Any, filename: str) -> str:
    """Random names under the team's folder: a stored path reveals nothing and is not guessable.

    Files are served only through the permission-checked download view, never from MEDIA_URL.
    """
    suffix = PurePosixPath(filename).suffix.lower()[:8]
    return f"checklist/papers/team-{instance.team_id}/{uuid.uuid4().hex}{suffix}"


class Paper(TimeStampedModel):
    submission = models.ForeignKey(
        ChecklistSubmission, on_delete=models.CASCADE, related_name="papers"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="papers")
    kind = models.CharField(max_length=1, choices=PaperKind.choices)
    title = models.CharField(max_length=500, blank=True)
    file = models.FileField(upload_to=paper_upload_path, blank=True, max_length=300)
    original_name = models.CharField(max_length=255, blank=True)
    source_format = models.CharField(max_length=4, choices=SourceFormat.choices, blank=True)
    extracted_text = models.TextField(blank=True)
    body_words = models.PositiveIntegerField(default=0)
    body_truncated = models.BooleanField(default=False)

    class Meta:
        ordering = ["submission", "kind"]
        constraints = [
            models.UniqueConstraint(
                fields=["submission", "kind"], name="uniq_paper_kind_per_submission"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} paper of submission {self.submission_id}"


class AnswerChoice(models.TextChoices):
    YES = "Yes", "Yes"
    NO = "No", "No"
    NA = "NA", "NA"
    TODO = "TODO", "TODO"


class ChecklistAnswer(TimeStampedModel):
    paper = models.ForeignKey(Paper, on_delete=models.CASCADE, related_name="answers")
    question = models.ForeignKey(
        ChecklistQuestion, on_delete=models.PROTECT, related_name="answers"
    )
    answer = models.CharField(max_length=4, choices=AnswerChoice.choices)
    raw_answer = models.CharField(max_length=100, blank=True)
    justification = models.TextField(blank=True)

    class Meta:
        ordering = ["paper", "question__number"]
        constraints = [
            models.UniqueConstraint(fields=["paper", "question"], name="uniq_answer_per_question"),
        ]

    def __str__(self) -> str:
        return f"Q{self.question_id}: {self.answer}"


# --- Checklist results -------------------------------------------------------------------


class AssessmentStatus(models.TextChoices):
    OK = "ok", "Assessed"
    SKIPPED_TODO = "todo", "TODO (not assessed)"
    JUDGE_FAILED = "judge_failed", "Judge failed"


class ChecklistAssessment(AppendOnlyModel):
    run = models.ForeignKey(
        "benchmarks_app.EvaluationRun",
        on_delete=models.CASCADE,
        related_name="checklist_assessments",
    )
    answer = models.ForeignKey(
        ChecklistAnswer, on_delete=models.CASCADE, related_name="assessments"
    )
    status = models.CharField(max_length=15, choices=AssessmentStatus.choices)
    correct = models.PositiveSmallIntegerField(null=True, blank=True, help_text="c = 1 or 0")
    feedback = models.TextField(blank=True)
    votes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["run", "answer"]
        constraints = [
            # Failed attempts stay on record; each answer gets at most one verdict per run.
            models.UniqueConstraint(
                fields=["run", "answer"],
                condition=~models.Q(status="judge_failed"),
                name="uniq_assessment_per_run",
            ),
        ]

    def __str__(self) -> str:
        return f"Run #{self.run_id}: answer #{self.answer_id} {self.status}"


class ChecklistScore(AppendOnlyModel):
    run = models.OneToOneField(
        "benchmarks_app.EvaluationRun", on_delete=models.CASCADE, related_name="checklist_score"
    )
    submission = models.ForeignKey(
        ChecklistSubmission, on_delete=models.CASCADE, related_name="scores"
    )
    c_g = models.FloatField()
    c_a = models.FloatField()
    c_t = models.FloatField()
    r = models.FloatField()
    s = models.FloatField(db_index=True)
    # 95% bootstrap interval of S (resampling questions), computed when the run ends:
    # {"metric", "low", "high", "level", "resamples", "seed"}.
    ci = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-s"]

    def __str__(self) -> str:
        return f"Score of run #{self.run_id} (S = {self.s:.3f})"
