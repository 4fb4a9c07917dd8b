"""Challenge phases (development, final, …) and the boards derived per entrant.

A phase belongs to exactly one target: a checklist challenge, an audit dataset release or a
probe suite. Targets without phases accept submissions whenever they are open (as before).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from benchmarks_app.models.audit import DatasetRelease
from benchmarks_app.models.checklist import Challenge
from benchmarks_app.models.common import LineEndsTextField, TimeStampedModel
from benchmarks_app.models.probes import ProbeSuite
from benchmarks_app.models.runs import Benchmark


class BundleInputs(models.TextChoices):
    """What a public run bundle carries of a participant's inputs (scan findings, responses,
    answers' justifications, and the judge prompts and answers that quote them). The run's
    owner and staff always get all of it; the metrics and verdicts travel in every case."""

    # Blank: the benchmark's default, settings.RUN_BUNDLE_INPUTS (itself "shown" unless set).
    DEFAULT = "", "The benchmark's default (RUN_BUNDLE_INPUTS)"
    SHOWN = "shown", "What the public pages show (matched findings' titles)"
    ALL = "all", "All of it"
    AFTER_END = "after_end", "All of it once the phase ends; what the pages show before"
    NEVER = "never", "None (only what the metrics need)"


class PhaseQuerySet(models.QuerySet["Phase"]):
    def open_at(self, when: object = None) -> PhaseQuerySet:
        now = when or timezone.now()
        return self.filter(starts_at__lte=now).filter(
            models.Q(ends_at__isnull=True) | models.Q(ends_at__gt=now)
        )

    def unrevealed(self) -> PhaseQuerySet:
        """Hidden and not yet revealed (the negation of :attr:`Phase.is_revealed`)."""
        return self.filter(is_hidden=True, revealed_at__isnull=True)

    def for_target(self, target: Challenge | DatasetRelease | ProbeSuite) -> PhaseQuerySet:
        if isinstance(target, Challenge):
            return self.filter(challenge=target)
        if isinstance(target, DatasetRelease):
            return self.filter(release=target)
        return self.filter(suite=target)


class Phase(TimeStampedModel):
    benchmark = models.CharField(max_length=10, choices=Benchmark.choices, db_index=True)
    challenge = models.ForeignKey(
        Challenge, null=True, blank=True, on_delete=models.CASCADE, related_name="phases"
    )
    release = models.ForeignKey(
        DatasetRelease, null=True, blank=True, on_delete=models.CASCADE, related_name="phases"
    )
    suite = models.ForeignKey(
        ProbeSuite, null=True, blank=True, on_delete=models.CASCADE, related_name="phases"
    )
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=100)
    description = LineEndsTextField(blank=True)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True, help_text="Empty: open-ended.")
    is_hidden = models.BooleanField(
        default=False,
        help_text="Board staff-only until revealed; participants see their own scores.",
    )
    revealed_at = models.DateTimeField(null=True, blank=True)
    daily_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Entries per entrant per day in this phase; empty: none."
    )
    total_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Entries per entrant in this phase; empty: none."
    )
    bundle_inputs = models.CharField(
        max_length=10,
        choices=BundleInputs.choices,
        default=BundleInputs.DEFAULT,
        blank=True,
        help_text="What a public run bundle of this phase carries of a participant's inputs; "
        "the run's owner and staff always get all of it.",
    )

    objects = PhaseQuerySet.as_manager()

    class Meta:
        ordering = ["starts_at", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(
                        benchmark=Benchmark.CHECKLIST,
                        challenge__isnull=False,
                        release__isnull=True,
                        suite__isnull=True,
                    )
                    | models.Q(
                        benchmark=Benchmark.AUDIT,
                        challenge__isnull=True,
                        release__isnull=False,
                        suite__isnull=True,
                    )
                    | models.Q(
                        benchmark=Benchmark.PROBES,
                        challenge__isnull=True,
                        release__isnull=True,
                        suite__isnull=False,
                    )
                ),
                name="phase_has_one_target_of_its_benchmark",
            ),
            models.CheckConstraint(
                condition=models.Q(ends_at__isnull=True)
                | models.Q(ends_at__gt=models.F("starts_at")),
                name="phase_ends_after_it_starts",
            ),
            models.UniqueConstraint(
                fields=["benchmark", "challenge", "release", "suite", "slug"],
                name="uniq_phase_slug_per_target",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.target} / {self.name}"

    @property
    def target(self) -> Challenge | DatasetRelease | ProbeSuite | None:
        return self.challenge or self.release or self.suite

    @property
    def is_revealed(self) -> bool:
        return not self.is_hidden or self.revealed_at is not None

    def is_open(self, when: object = None) -> bool:
        now = when or timezone.now()
        return bool(self.starts_at <= now and (self.ends_at is None or now < self.ends_at))  # type: ignore[operator]
