from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.functions import Now
from django.utils import timezone

from benchmarks_app.models.audit import DatasetRelease, Repo, Scanner
from benchmarks_app.models.checklist import ChecklistSubmission
from benchmarks_app.models.common import EntryMetadata, TimeStampedModel
from benchmarks_app.models.judge_records import DEFAULT_JUDGE_RECORD_NAMES
from benchmarks_app.models.probes import ResponseSubmission


class Benchmark(models.TextChoices):
    AUDIT = "audit", "Audit findings"
    PROBES = "probes", "Safety probes"
    CHECKLIST = "checklist", "Paper checklist"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    # The judge stayed down past JUDGE_OUTAGE_PATIENCE_S; the sweeper re-queues the run.
    WAITING = "waiting", "Waiting for judge"


ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)


class EvaluationRunQuerySet(models.QuerySet["EvaluationRun"]):
    def for_benchmark(self, benchmark: str) -> EvaluationRunQuerySet:
        return self.filter(benchmark=benchmark)

    def succeeded(self) -> EvaluationRunQuerySet:
        return self.filter(status=RunStatus.SUCCEEDED)

    def active(self) -> EvaluationRunQuerySet:
        return self.filter(status__in=ACTIVE_STATUSES)


# The columns ``selectors.visibility.visible_runs`` filters on (a checklist team's entries,
# hidden phases, a signed-in user's own runs): the run lists' indexes end with them, so that a
# list's count and its page's keys are read from an index alone.
RUN_VISIBILITY_COLUMNS = (
    "checklist_submission",
    "phase",
    "created_by",
    "scanner",
    "probe_submission",
)


class EvaluationRun(EntryMetadata, TimeStampedModel):
    """One evaluation of one target; its results are appended to the benchmark's result table."""

    benchmark = models.CharField(max_length=10, choices=Benchmark.choices, db_index=True)
    # Exactly one target, depending on the benchmark.
    scanner = models.ForeignKey(
        Scanner, null=True, blank=True, on_delete=models.CASCADE, related_name="runs"
    )
    repos = models.ManyToManyField(Repo, blank=True, related_name="runs")
    # The frozen truth an audit run judged (empty for runs made before releases existed).
    release = models.ForeignKey(
        DatasetRelease, null=True, blank=True, on_delete=models.PROTECT, related_name="runs"
    )
    probe_submission = models.ForeignKey(
        ResponseSubmission, null=True, blank=True, on_delete=models.CASCADE, related_name="runs"
    )
    checklist_submission = models.ForeignKey(
        ChecklistSubmission, null=True, blank=True, on_delete=models.CASCADE, related_name="runs"
    )
    judge = models.CharField(max_length=300, default="offline")
    judge_config = models.JSONField(default=dict, blank=True)
    # The curated judge the run is made with (empty: a replay folder, or a run made before
    # judges were records); the worker builds the judge from it, not from its environment.
    judge_record = models.ForeignKey(
        "benchmarks_app.JudgeRecord",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="runs",
    )
    status = models.CharField(
        max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True
    )
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    failed_items = models.PositiveIntegerField(
        default=0, help_text="Items whose judge votes could not be obtained."
    )
    is_complete = models.BooleanField(
        default=False, help_text="All items were judged; metrics of incomplete runs are marked."
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    task_id = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # The phase the entry was submitted in (copied from the submission for probes/checklist).
    phase = models.ForeignKey(
        "benchmarks_app.Phase",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="runs",
    )
    # Audit: the scanner owner's chosen run for the board of its release/phase.
    board_choice = models.BooleanField(default=False)

    objects = EvaluationRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        # The run lists' orderings (newest first, all or one benchmark): a page is read from
        # the index instead of sorting every run.
        indexes = [
            # The runs list, newest first, with the visibility filter's columns: a page's
            # keys are read from this index alone however deep the page (then its rows by key).
            models.Index(
                fields=[
                    "-created_at",
                    "-id",
                    *RUN_VISIBILITY_COLUMNS,
                ],
                name="run_list_newest_visible",
            ),
            # One benchmark's runs, newest first, with the visibility filter's columns: its
            # page and count read no table row (a member's list: 46 ms at 300,000 runs).
            models.Index(
                fields=[
                    "benchmark",
                    "-created_at",
                    "-id",
                    *RUN_VISIBILITY_COLUMNS,
                ],
                name="run_list_benchmark_visible",
            ),
            # A board's runs under way (its page lists them): a few among 100,000 ended ones.
            models.Index(fields=["release", "status"], name="run_release_status"),
            # One scanner's runs of a release (what a run's end re-reads for its board row):
            # a few rows, where the release's index alone scans 100,000.
            models.Index(fields=["scanner", "release"], name="run_scanner_release"),
            # What a run list's visibility filter reads, a signed-in user's own runs included
            # (creator, scanner, submission): its COUNT(*) scans this index, not the table
            # (300,000 runs: 39 ms for a member's list with the first two columns only).
            models.Index(
                fields=[
                    *RUN_VISIBILITY_COLUMNS,
                ],
                name="run_visibility_owners",
            ),
            # The runs list filtered by status: its page read newest first down this index and
            # its count from it (the status's own index made SQLite read and sort every failed
            # run of 300,000: 40 ms).
            models.Index(
                fields=[
                    "status",
                    "-created_at",
                    "-id",
                    *RUN_VISIBILITY_COLUMNS,
                ],
                name="run_list_status_visible",
            ),
            # The home page's counts per benchmark and status, visibility included: one scan
            # of this index (300,000 runs), never of the table.
            models.Index(
                fields=[
                    "benchmark",
                    "status",
                    *RUN_VISIBILITY_COLUMNS,
                ],
                name="run_counts_visible",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(progress_done__lte=models.F("progress_total"))
                | models.Q(progress_total=0),
                name="run_progress_within_total",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_benchmark_display()} run #{self.pk} ({self.status})"

    @property
    def target_label(self) -> str:
        if self.scanner_id:
            return str(self.scanner)
        if self.probe_submission_id:
            return str(self.probe_submission)
        if self.checklist_submission_id:
            return str(self.checklist_submission)
        return "—"

    @property
    def judge_label(self) -> str:
        """The judge as people name it, on every page, API, command and ledger that names one:
        the curated judge record's name (``smollm``), else the run's judge (``offline``,
        ``openai:MODEL``, ``replay:DIR``).

        The default records (``offline``, ``openai``) add nothing to the run's own spelling,
        which carries the model. An audit run of a curated record stores its name as its board
        (no query); other runs read their record (list pages select it with the run).
        """
        board = (self.judge_config or {}).get("board")
        if board:
            return str(board)
        if self.judge_record_id is not None:
            name = self.judge_record.name  # type: ignore[union-attr]
            if name not in DEFAULT_JUDGE_RECORD_NAMES:
                return name
        return self.judge

    @property
    def progress_percent(self) -> float:
        if not self.progress_total:
            return 0.0
        return 100.0 * self.progress_done / self.progress_total

    @property
    def duration_s(self) -> float | None:
        if not self.started_at:
            return None
        end = self.finished_at or timezone.now()
        return (end - self.started_at).total_seconds()


class PieceStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting for judge"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


# The error of a piece parked because a write failed (a full disk): health and metrics find
# them by it; the sweeper tries them again as it does pieces parked on a down judge.
WRITE_FAILURE_PREFIX = "Write failed: "

# The error of a piece its run's cancel ended (stored as failed, so that every reader of ended
# pieces stays as it is): metrics count these as cancelled, not failed.
PIECE_CANCELLED_ERROR = "run cancelled"


class RunPieceQuerySet(models.QuerySet["RunPiece"]):
    def unfinished(self) -> RunPieceQuerySet:
        return self.exclude(status__in=[PieceStatus.DONE, PieceStatus.FAILED])

    def cancelled(self) -> RunPieceQuerySet:
        return self.filter(status=PieceStatus.FAILED, error=PIECE_CANCELLED_ERROR)

    def parked_on_write_failure(self) -> RunPieceQuerySet:
        return self.filter(status=PieceStatus.WAITING, error__startswith=WRITE_FAILURE_PREFIX)

    def lease_expired(self, now: Any = None) -> RunPieceQuerySet:
        # The database's clock by default: the one leases are written by.
        return self.filter(status=PieceStatus.RUNNING, lease_expires_at__lt=now or Now())


class RunPiece(models.Model):
    """One queue task's share of a run (an audit repo; the whole run for the other benchmarks).

    A worker holds a piece under a lease that a timer renews; ``attempt`` is the fencing token:
    every write for the piece checks it, so a worker whose lease was taken over cannot write
    over the new owner. The run ends when its last piece does.
    """

    run = models.ForeignKey(EvaluationRun, on_delete=models.CASCADE, related_name="pieces")
    key = models.CharField(max_length=200, blank=True, help_text="Repo project id, or empty.")
    status = models.CharField(
        max_length=10, choices=PieceStatus.choices, default=PieceStatus.QUEUED, db_index=True
    )
    attempt = models.PositiveIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    worker = models.CharField(max_length=200, blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    # Times the sweeper handed the piece out again after a lost worker or task (not judge
    # pauses): past RUN_PIECE_MAX_REQUEUES the piece fails with its cause instead.
    requeues = models.PositiveIntegerField(default=0)
    # A piece parked while the judge was down is not handed out again before this.
    retry_at = models.DateTimeField(null=True, blank=True)
    # The judge outage its worker is riding out, as the worker last saw it (ISO times):
    # {"since", "next_try" (null while a probe is in flight), "gives_up_at", "error"}; empty
    # once the judge answers. Its run's page says why it waits from this
    # (selectors.run_health.run_waiting_reason).
    judge_outage = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    objects = RunPieceQuerySet.as_manager()

    class Meta:
        ordering = ["run_id", "key"]
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="run_piece_unique_key"),
        ]

    def __str__(self) -> str:
        return f"run #{self.run_id} piece {self.key or '-'} ({self.status}, attempt {self.attempt})"


class WorkerClock(models.Model):
    """How far a worker machine's clock is from the database's, measured when a worker
    process starts and on each sweep. Leases are timed by the database's clock, so a skewed
    worker cannot take or lose a piece by it; what it writes by its own clock (a run's start
    and end times, log lines) is off by this much."""

    host = models.CharField(max_length=200, unique=True)
    skew_s = models.FloatField(help_text="The database's clock minus this host's, in seconds.")
    measured_at = models.DateTimeField(help_text="By the database's clock.")

    def __str__(self) -> str:
        return f"{self.host}: {self.skew_s:+.2f} s"
