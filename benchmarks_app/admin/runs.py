"""Runs in the admin: the runs themselves (resume, cancel, the stuck ones), their pieces, and
their results, read-only (audit and probe results, probe reports, checklist scores, the
workers' clocks). The judge ledger is :mod:`.judge_calls`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    ChecklistAssessment,
    ChecklistScore,
    EvaluationRun,
    JudgeCall,
    ProbeCaseResult,
    ProbeRunReport,
    RunPiece,
    RunStatus,
    WorkerClock,
)
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.run_health import stuck_after_s, stuck_runs
from benchmarks_app.selectors.runs import describe_failed_items, run_failed_items
from benchmarks_app.services import runs as run_services


def judge_named(run: EvaluationRun, spelling: str) -> str:
    """A judge as the admin lists name it: the run's judge record's name, with the judge's
    own spelling (``openai:MODEL``) beside it when they differ."""
    label = run.judge_label
    return spelling if label == spelling else f"{label} ({spelling})"


class ReadOnlyAdmin(admin.ModelAdmin):
    """Results and the judge ledger are append-only: read and filtered, never edited here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RunPieceInline(admin.TabularInline):
    """Who holds each piece of the run (an audit repo, or the whole run) and until when."""

    model = RunPiece
    extra = 0
    can_delete = False
    fields = (
        "key",
        "status",
        "attempt",
        "worker",
        "lease_expires_at",
        "requeues",
        "retry_at",
        "enqueued_at",
        "started_at",
        "finished_at",
        "error",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def stuck_cutoff() -> Any:
    return timezone.now() - timedelta(seconds=stuck_after_s())


class StuckRunFilter(admin.SimpleListFilter):
    """Active runs with no progress or lease renewal for ``RUN_STUCK_AFTER_S``."""

    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Stuck")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[EvaluationRun]) -> Any:
        if self.value() == "yes":
            return queryset.filter(pk__in=stuck_runs().values("pk"))
        return queryset


@admin.register(RunPiece)
class RunPieceAdmin(ReadOnlyAdmin):
    """Every piece of every run with its lease: who holds it, until when, how often it was
    handed out again; the stuck ones are filtered by status and lease."""

    list_display = (
        "id",
        "run_link",
        "key",
        "status",
        "attempt",
        "requeues",
        "worker",
        "lease_expires_at",
        "retry_at",
        "enqueued_at",
    )
    list_filter = ("status", "run__benchmark", "run__status")
    search_fields = ("=run__id", "key", "worker")
    list_select_related = ("run",)
    ordering = ("-id",)

    @admin.display(description="Run", ordering="run_id")
    def run_link(self, obj: RunPiece) -> str:
        url = reverse("admin:benchmarks_app_evaluationrun_change", args=[obj.run_id])
        return format_html('<a href="{}">#{}</a>', url, obj.run_id)


@admin.register(EvaluationRun)
class EvaluationRunAdmin(admin.ModelAdmin):
    inlines = [RunPieceInline]
    list_display = (
        "id",
        "benchmark",
        "target",
        "judge_name",
        "status",
        "progress",
        "failed_items",
        "is_complete",
        "stuck",
        "created_at",
        "finished_at",
    )
    list_filter = ("benchmark", "status", StuckRunFilter, "is_complete", "judge")
    search_fields = ("id", "scanner__name", "probe_submission__model_name", "judge")
    list_select_related = (
        "scanner",
        "probe_submission__suite",
        "checklist_submission__team",
        "judge_record",
    )
    actions = ["resume_runs", "cancel_runs"]

    # Runs are created only by the services (which queue them and freeze their judge
    # configuration) and are the record their results and ledger hang on: no add, no delete,
    # and every field read-only. Resume and cancel are the actions above.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [
            *(f.name for f in self.model._meta.concrete_fields),
            "judge_calls",
            "failed_item_list",
        ]

    @admin.display(description="Judge", ordering="judge")
    def judge_name(self, obj: EvaluationRun) -> str:
        return judge_named(obj, obj.judge)

    @admin.display(description="Judge calls")
    def judge_calls(self, obj: EvaluationRun) -> str:
        """How many calls the ledger holds for this run, by status, linked to the list."""
        counts = dict(
            JudgeCall.objects.filter(run=obj)
            .values("status")
            .annotate(n=Count("id"))
            .values_list("status", "n")
        )
        url = reverse("admin:benchmarks_app_judgecall_changelist") + f"?run={obj.pk}"
        if not counts:
            return "none"
        by_status = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        return format_html('<a href="{}">{} call(s)</a> ({})', url, sum(counts.values()), by_status)

    @admin.display(description="Failed items")
    def failed_item_list(self, obj: EvaluationRun) -> str:
        if not obj.failed_items:
            return "—"
        return describe_failed_items(run_failed_items(run=obj), limit=50) or "—"

    @admin.action(description="Resume selected failed or stalled runs (redo only what is missing)")
    def resume_runs(self, request: HttpRequest, queryset: QuerySet[EvaluationRun]) -> None:
        resumed, refused = 0, []
        for run in queryset:
            try:
                run_services.run_resume(run=run)
                resumed += 1
            except run_services.RunNotResumable as exc:
                refused.append(str(exc))
        if resumed:
            self.message_user(request, f"Queued {resumed} run(s) again.", messages.SUCCESS)
        for reason in refused:
            self.message_user(request, reason, messages.WARNING)

    @admin.action(description="Cancel selected queued, waiting or running runs")
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[EvaluationRun]) -> None:
        cancelled = sum(
            run_services.run_cancel(run=run).status == RunStatus.CANCELLED
            for run in queryset.filter(status__in=run_services.CANCELLABLE)
        )
        self.message_user(
            request,
            f"Cancelled {cancelled} run(s); running ones stop between judge calls, keeping "
            "what was judged.",
            messages.SUCCESS,
        )

    @admin.display(description="Stuck", boolean=True)
    def stuck(self, obj: EvaluationRun) -> bool:
        """Active with no progress or lease renewal for RUN_STUCK_AFTER_S."""
        return obj.status in ACTIVE_STATUSES and obj.updated_at < stuck_cutoff()

    @admin.display(description="Target")
    def target(self, obj: EvaluationRun) -> str:
        return obj.target_label

    @admin.display(description="Progress")
    def progress(self, obj: EvaluationRun) -> str:
        return f"{obj.progress_done}/{obj.progress_total}"


@admin.register(AuditTruthResult)
class AuditTruthResultAdmin(ReadOnlyAdmin):
    list_display = ("run", "repo", "truth_finding", "outcome", "scan_finding")
    list_filter = ("outcome", "repo")
    list_select_related = ("run", "repo", "truth_finding", "scan_finding")
    search_fields = ("truth_finding__finding_id", "explanation")


@admin.register(AuditRepoResult)
class AuditRepoResultAdmin(ReadOnlyAdmin):
    list_display = ("run", "repo", "scanner", "is_complete", "created_at")
    list_filter = ("scanner", "is_complete")
    list_select_related = ("run", "repo", "scanner")


@admin.register(ProbeCaseResult)
class ProbeCaseResultAdmin(ReadOnlyAdmin):
    list_display = (
        "run",
        "probe",
        "passed",
        "risk_score",
        "weighted_risk",
        "boundary_or_refusal_signal",
    )
    list_filter = ("passed", "boundary_or_refusal_signal")
    list_select_related = ("run", "probe__suite")


@admin.register(ProbeRunReport)
class ProbeRunReportAdmin(ReadOnlyAdmin):
    list_display = (
        "run",
        "submission",
        "resilience_index",
        "pass_rate",
        "severity_weighted_pass_rate",
        "high_stakes_failure_rate",
    )
    list_select_related = ("run", "submission__suite")


@admin.register(ChecklistAssessment)
class ChecklistAssessmentAdmin(ReadOnlyAdmin):
    list_display = ("run", "answer", "status", "correct")
    list_filter = ("status", "correct")
    list_select_related = ("run", "answer__question", "answer__paper")


@admin.register(ChecklistScore)
class ChecklistScoreAdmin(ReadOnlyAdmin):
    list_display = ("run", "submission", "c_g", "c_a", "c_t", "r", "s")
    list_select_related = ("run", "submission__team")


@admin.register(WorkerClock)
class WorkerClockAdmin(ReadOnlyAdmin):
    """Each worker host's clock against the database's (measured at start and each sweep)."""

    list_display = ("host", "skew_s", "measured_at")
    ordering = ("host",)
