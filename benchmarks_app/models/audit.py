"""The audit benchmark's models: its data (repos, truth findings, datasets and their
releases), the scanners and their scan results, and the appended results of audit runs. The
board rows are in :mod:`benchmarks_app.models.audit_board`."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Count, Q
from simple_history.models import HistoricalRecords

# The board rows have a module of their own; their names stay importable from here (the
# pages, the API, the board services and migrations 0022 and 0023 import them from here).
from benchmarks_app.models.audit_board import AuditBoardRow as AuditBoardRow
from benchmarks_app.models.audit_board import audit_board_sort_fields as audit_board_sort_fields
from benchmarks_app.models.audit_board import audit_metric_columns as audit_metric_columns
from benchmarks_app.models.common import (
    QA_SEVERITIES,
    AppendOnlyModel,
    LineEndsTextField,
    Severity,
    TimeStampedModel,
)


class RepoQuerySet(models.QuerySet["Repo"]):
    def public(self) -> RepoQuerySet:
        return self.filter(is_public=True)

    def with_counts(self) -> RepoQuerySet:
        return self.annotate(
            # Versions replaced by a curation edit stay with their releases; count the current.
            truth_count=Count(
                "truth_findings", filter=Q(truth_findings__is_current=True), distinct=True
            ),
            # Versions replaced by a later import stay for the runs that judged them; a
            # listing counts the scanners whose results are current.
            scan_result_count=Count(
                "scan_results", filter=Q(scan_results__is_current=True), distinct=True
            ),
        )


class Repo(TimeStampedModel):
    """An audited code base with verified ground-truth findings."""

    project_id = models.CharField(max_length=200, unique=True)
    name = models.CharField(max_length=200)
    platform = models.CharField(max_length=50, blank=True, db_index=True)
    repository_url = models.URLField(max_length=500, blank=True)
    contract_files = models.JSONField(default=list, blank=True)
    codebases = models.JSONField(default=list, blank=True)
    docs = models.JSONField(default=dict, blank=True)
    is_public = models.BooleanField(
        default=False,
        help_text="Public repos show their ground-truth descriptions to everybody; "
        "otherwise only staff see them.",
    )

    objects = RepoQuerySet.as_manager()

    class Meta:
        ordering = ["project_id"]

    def __str__(self) -> str:
        return self.project_id


class TruthFindingQuerySet(models.QuerySet["TruthFinding"]):
    def current(self) -> TruthFindingQuerySet:
        return self.filter(is_current=True)


class TruthFinding(TimeStampedModel):
    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="truth_findings")
    finding_id = models.CharField(max_length=200)
    order = models.PositiveIntegerField(default=0, help_text="Position in the source file.")
    severity = models.CharField(max_length=20, choices=Severity.choices, db_index=True)
    raw_severity = models.CharField(max_length=50, blank=True)
    title = LineEndsTextField()
    description = LineEndsTextField(blank=True)
    category = models.CharField(max_length=100, blank=True)
    contracts = models.JSONField(default=list, blank=True)
    # A truth finding frozen in a published release never changes: a curation edit makes a
    # new version (``supersedes`` the old one) that only later releases contain.
    is_current = models.BooleanField(default=True, db_index=True)
    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="superseded_by"
    )
    # Fields a maintainer changed in the admin since the last import (kept on re-import).
    edited_fields = models.JSONField(default=list, blank=True)

    history = HistoricalRecords()

    objects = TruthFindingQuerySet.as_manager()

    class Meta:
        ordering = ["repo", "order", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["repo", "finding_id"],
                condition=Q(is_current=True),
                name="uniq_current_truth_finding_per_repo",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.finding_id}: {self.title[:60]}"


class ScannerQuerySet(models.QuerySet["Scanner"]):
    def with_counts(self, runs: Q | None = None) -> ScannerQuerySet:
        """``run_count`` (the runs that match ``runs``, all without it) and
        ``scan_result_count`` (repos with current results)."""
        return self.annotate(
            run_count=Count("runs", filter=runs, distinct=True),
            scan_result_count=Count(
                "scan_results", filter=Q(scan_results__is_current=True), distinct=True
            ),
        )


class Scanner(TimeStampedModel):
    """An AI auditing tool whose findings are scored."""

    name = models.CharField(max_length=100, unique=True)
    description = LineEndsTextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    is_baseline = models.BooleanField(
        default=False, help_text="A reference scanner: ranked like any other, shown with a badge."
    )

    objects = ScannerQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ScanResultQuerySet(models.QuerySet["ScanResult"]):
    def current(self) -> ScanResultQuerySet:
        return self.filter(is_current=True)


class ScanResult(TimeStampedModel):
    """One version of a scanner's output for one repo, with the raw metadata (token usage).

    A version's findings never change: importing different findings for the same scanner and
    repo adds a new version and makes it current, so the runs that judged an earlier version
    can still be reproduced and inspected. Identical findings (same ``content_hash``) add
    nothing; they make their version current again if a later one had replaced it.
    """

    scanner = models.ForeignKey(Scanner, on_delete=models.CASCADE, related_name="scan_results")
    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="scan_results")
    version = models.PositiveIntegerField(
        default=1, help_text="1, 2, … in import order, per scanner and repo."
    )
    is_current = models.BooleanField(
        default=True,
        db_index=True,
        help_text="The version that new runs evaluate and the leaderboard ranks.",
    )
    content_hash = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the normalized findings."
    )
    source_name = models.CharField(max_length=300, blank=True)
    raw_metadata = models.JSONField(default=dict, blank=True)
    declared_empty = models.BooleanField(
        default=False, help_text="The participant said the tool found nothing in this repo."
    )

    objects = ScanResultQuerySet.as_manager()

    class Meta:
        ordering = ["scanner", "repo", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["scanner", "repo"],
                condition=Q(is_current=True),
                name="uniq_current_scan_result",
            ),
            models.UniqueConstraint(
                fields=["scanner", "repo", "content_hash"], name="uniq_scan_result_content"
            ),
            models.UniqueConstraint(
                fields=["scanner", "repo", "version"], name="uniq_scan_result_version"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scanner} on {self.repo} (v{self.version})"


class ScanFindingQuerySet(models.QuerySet["ScanFinding"]):
    def qa(self) -> ScanFindingQuerySet:
        return self.filter(severity__in=QA_SEVERITIES)

    def non_qa(self) -> ScanFindingQuerySet:
        return self.exclude(severity__in=QA_SEVERITIES)

    def severity_counts(self) -> dict[str, int]:
        rows = self.values("severity").annotate(n=Count("id"))
        return {row["severity"]: row["n"] for row in rows}


class ScanFinding(TimeStampedModel):
    scan_result = models.ForeignKey(ScanResult, on_delete=models.CASCADE, related_name="findings")
    index = models.PositiveIntegerField(help_text="Position in the scanner's file, from 0.")
    external_id = models.CharField(max_length=200, blank=True)
    title = LineEndsTextField()
    description = LineEndsTextField(blank=True)
    severity = models.CharField(max_length=20, choices=Severity.choices, db_index=True)
    raw_severity = models.CharField(max_length=50, blank=True)
    category = models.CharField(max_length=100, blank=True)
    vulnerability_type = models.CharField(max_length=300, blank=True)
    contracts = models.JSONField(default=list, blank=True)
    file = models.CharField(max_length=500, blank=True)
    location = models.CharField(max_length=500, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    objects = ScanFindingQuerySet.as_manager()

    class Meta:
        ordering = ["scan_result", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["scan_result", "index"], name="uniq_scan_finding_index"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.index} {self.title[:60]}"

    @property
    def is_qa(self) -> bool:
        return self.severity in QA_SEVERITIES


# --- Audit results -----------------------------------------------------------------------


class MatchOutcome(models.TextChoices):
    MATCH = "match", "Exact match"
    PARTIAL = "partial", "Partial match"
    NONE = "none", "Not found"
    JUDGE_FAILED = "judge_failed", "Judge failed"


class AuditTruthResult(AppendOnlyModel):
    """The consensus for one truth finding in one run, with every vote."""

    run = models.ForeignKey(
        "benchmarks_app.EvaluationRun", on_delete=models.CASCADE, related_name="audit_results"
    )
    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="+")
    truth_finding = models.ForeignKey(
        TruthFinding, on_delete=models.CASCADE, related_name="results"
    )
    outcome = models.CharField(max_length=15, choices=MatchOutcome.choices, db_index=True)
    scan_finding = models.ForeignKey(
        ScanFinding, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    explanation = models.TextField(blank=True)
    votes = models.JSONField(default=list, blank=True)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "repo", "truth_finding__order"]
        constraints = [
            # A judge-failed result is followed by a new row when the run resumes; every other
            # outcome is final, so at most one per run and truth finding.
            models.UniqueConstraint(
                fields=["run", "truth_finding"],
                condition=~models.Q(outcome="judge_failed"),
                name="uniq_audit_result_per_run",
            ),
        ]

    def __str__(self) -> str:
        return f"Run #{self.run_id}: truth finding #{self.truth_finding_id} {self.outcome}"


class AuditRepoResult(AppendOnlyModel):
    """Metrics of one repo in one run, computed once the repo is finished."""

    run = models.ForeignKey(
        "benchmarks_app.EvaluationRun", on_delete=models.CASCADE, related_name="audit_repo_results"
    )
    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="repo_results")
    scanner = models.ForeignKey(Scanner, on_delete=models.CASCADE, related_name="repo_results")
    # The version that was judged. RESTRICT: a judged version cannot be deleted on its own
    # (the run could no longer be inspected), only together with its scanner, repo or run.
    scan_result = models.ForeignKey(
        ScanResult,
        null=True,
        blank=True,
        on_delete=models.RESTRICT,
        related_name="repo_results",
    )
    is_complete = models.BooleanField(default=True)
    judge = models.CharField(max_length=300, blank=True)
    metrics = models.JSONField(default=dict)
    false_positive_indices = models.JSONField(default=list, blank=True)
    notes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["run", "repo"]
        constraints = [
            # Incomplete results (judge failures) are followed by a complete one on resume.
            models.UniqueConstraint(
                fields=["run", "repo"],
                condition=models.Q(is_complete=True),
                name="uniq_audit_repo_result_per_run",
            ),
        ]

    def __str__(self) -> str:
        return f"Run #{self.run_id}: repo #{self.repo_id}"


class AuditRunScan(AppendOnlyModel):
    """The scan result version a run judges on one repo, fixed when the run is created.

    A resumed run keeps judging these versions even after newer ones were imported.
    """

    run = models.ForeignKey(
        "benchmarks_app.EvaluationRun", on_delete=models.CASCADE, related_name="audit_scans"
    )
    repo = models.ForeignKey(Repo, on_delete=models.CASCADE, related_name="+")
    scan_result = models.ForeignKey(ScanResult, on_delete=models.RESTRICT, related_name="run_scans")

    class Meta:
        ordering = ["run", "repo"]
        constraints = [
            models.UniqueConstraint(fields=["run", "repo"], name="uniq_audit_run_scan"),
        ]

    def __str__(self) -> str:
        return f"run #{self.run_id}: {self.scan_result}"


class AuditDataset(TimeStampedModel):
    """A named set of repos (e.g. ``auditagent-2025-08``) whose truth is frozen in releases."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200, blank=True)
    description = LineEndsTextField(blank=True)
    repos = models.ManyToManyField(Repo, blank=True, related_name="datasets")
    official_release = models.ForeignKey(
        "DatasetRelease", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    official_judge = models.CharField(
        max_length=300, blank=True, help_text="The judge whose board the site shows first."
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class DatasetRelease(TimeStampedModel):
    """``SLUG@N``: the truth findings of a dataset's repos, frozen once published."""

    dataset = models.ForeignKey(AuditDataset, on_delete=models.CASCADE, related_name="releases")
    number = models.PositiveIntegerField()
    is_published = models.BooleanField(default=False)
    published_at = models.DateTimeField(null=True, blank=True)
    notes = LineEndsTextField(blank=True)
    truth_findings = models.ManyToManyField(TruthFinding, blank=True, related_name="releases")
    # The repos the release covers, frozen with its truth: a board's coverage is counted
    # against them (a repo may have no truth finding of its own).
    repos = models.ManyToManyField(Repo, blank=True, related_name="releases")

    class Meta:
        ordering = ["dataset", "number"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "number"], name="uniq_release_number"),
        ]

    def __str__(self) -> str:
        return f"{self.dataset.slug}@{self.number}"
