from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    ChecklistAssessment,
    ChecklistScore,
    EvaluationRun,
    JudgeCacheEntry,
    JudgeCall,
    ProbeCaseResult,
    ProbeRunReport,
    RunPiece,
    RunStatus,
)
from benchmarks_app.services import runs as run_services


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
        "enqueued_at",
        "started_at",
        "finished_at",
        "error",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(EvaluationRun)
class EvaluationRunAdmin(admin.ModelAdmin):
    inlines = [RunPieceInline]
    list_display = (
        "id",
        "benchmark",
        "target",
        "judge",
        "status",
        "progress",
        "failed_items",
        "is_complete",
        "created_at",
        "finished_at",
    )
    list_filter = ("benchmark", "status", "is_complete", "judge")
    search_fields = ("id", "scanner__name", "probe_submission__model_name", "judge")
    list_select_related = ("scanner", "probe_submission__suite", "checklist_submission__team")
    actions = ["resume_runs", "cancel_runs"]

    # Runs are created only by the services (which queue them and freeze their judge
    # configuration) and are the record their results and ledger hang on: no add, no delete,
    # and every field read-only. Resume and cancel are the actions above.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in self.model._meta.concrete_fields]

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

    @admin.action(description="Cancel selected queued runs")
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[EvaluationRun]) -> None:
        cancelled = sum(
            run_services.run_cancel(run=run).status == RunStatus.CANCELLED
            for run in queryset.filter(status=RunStatus.QUEUED)
        )
        self.message_user(request, f"Cancelled {cancelled} queued run(s).", messages.SUCCESS)

    @admin.display(description="Target")
    def target(self, obj: EvaluationRun) -> str:
        return obj.target_label

    @admin.display(description="Progress")
    def progress(self, obj: EvaluationRun) -> str:
        return f"{obj.progress_done}/{obj.progress_total}"


@admin.register(JudgeCall)
class JudgeCallAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "run",
        "judge",
        "model",
        "vote_number",
        "status",
        "latency_ms",
        "tokens_in",
        "tokens_out",
    )
    list_filter = ("status", "judge", "model")
    search_fields = ("prompt_hash", "error")
    list_select_related = ("run",)


@admin.register(JudgeCacheEntry)
class JudgeCacheEntryAdmin(ReadOnlyAdmin):
    """Cached verdicts: deleting one only makes the next run ask the judge again."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm("benchmarks_app.delete_judgecacheentry"))

    list_display = ("key", "judge", "model", "prompt_version", "vote_number", "created_at")
    list_filter = ("judge", "model", "prompt_version")
    search_fields = ("key",)


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
