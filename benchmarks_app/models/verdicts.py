"""Curated verdicts: the correct answer to a question judges are asked, recorded by a person.

A verdict settles an *item*, named by a key that does not depend on the run or the judge (an
audit truth finding against one version of a scanner's findings; a probe response's text), so
that every judge's judgement of the same question is compared with it. Verdicts are appended,
never changed: a new curation of an item supersedes the current one (``supersedes``), and the
chain of an item is its history. Judges never write here.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from benchmarks_app.models.common import AppendOnlyModel
from benchmarks_app.models.runs import Benchmark

# The verdicts each benchmark's items take (what a judge's judgement is reduced to).
AUDIT_VERDICTS = ("match", "partial", "none")
PROBE_VERDICTS = ("refusal", "compliance")
VERDICT_CLASSES: dict[str, tuple[str, ...]] = {
    Benchmark.AUDIT: AUDIT_VERDICTS,
    Benchmark.PROBES: PROBE_VERDICTS,
}


class VerdictSource(models.TextChoices):
    MAINTAINER = "maintainer", "A maintainer's review"
    RECORDED = "recorded", "Imported recorded verdicts"
    HUMAN_LABELS = "human_labels", "Imported human labels"


class CuratedVerdictQuerySet(models.QuerySet["CuratedVerdict"]):
    def current(self) -> CuratedVerdictQuerySet:
        """The latest curation of each item (the one no later curation supersedes)."""
        return self.filter(superseded_by__isnull=True)


class CuratedVerdict(AppendOnlyModel):
    benchmark = models.CharField(max_length=10, choices=Benchmark.choices)
    item_key = models.CharField(
        max_length=500, help_text="The item, independent of run and judge (see the selectors)."
    )
    item_label = models.CharField(max_length=500, blank=True, help_text="What the item is.")
    verdict = models.CharField(max_length=20)
    source = models.CharField(max_length=20, choices=VerdictSource.choices)
    source_name = models.CharField(
        max_length=300, blank=True, help_text="The file or set an imported verdict came from."
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)
    # One chain per item: one root (constraint below), each verdict superseded at most once.
    supersedes = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="superseded_by"
    )

    objects = CuratedVerdictQuerySet.as_manager()

    class Meta:
        ordering = ["benchmark", "item_key", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark", "item_key"],
                condition=Q(supersedes__isnull=True),
                name="uniq_curated_verdict_root",
            ),
        ]
        indexes = [models.Index(fields=["benchmark", "item_key"], name="curated_verdict_item")]

    def clean(self) -> None:
        allowed = VERDICT_CLASSES.get(self.benchmark)
        if allowed is None:
            raise ValidationError({"benchmark": f"{self.benchmark!r} has no curated verdicts"})
        if self.verdict not in allowed:
            raise ValidationError(
                {"verdict": f"{self.verdict!r} is not one of {', '.join(allowed)}"}
            )

    def __str__(self) -> str:
        return f"{self.benchmark} {self.item_key}: {self.verdict}"


def audit_item_key(*, project_id: str, finding_id: str, scan_version: str) -> str:
    """One truth finding judged against one version of a scanner's findings (``scan_version``:
    the version's content hash), whichever run or judge asked."""
    return f"{project_id}/{finding_id}@{scan_version}"


def probe_item_key(*, suite: str, probe_id: str, output: str) -> str:
    """One response text to one probe: the same text is the same question for every judge."""
    return f"{suite}/{probe_id}@{hashlib.sha256(output.encode('utf-8')).hexdigest()}"
