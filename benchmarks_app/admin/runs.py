from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.db.models import CharField, Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Cast, Greatest, StrIndex, Substr
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from benchmarks_app.formatting import whole_number
from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    ChecklistAssessment,
    ChecklistScore,
    EvaluationRun,
    JudgeCacheEntry,
    JudgeCall,
    JudgePrompt,
    ProbeCaseResult,
    ProbeRunReport,
    RunPiece,
    RunStatus,
)
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.run_health import stuck_after_s, stuck_runs
from benchmarks_app.selectors.runs import describe_failed_items, run_failed_items
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
        "judge",
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
        return [
            *(f.name for f in self.model._meta.concrete_fields),
            "judge_calls",
            "failed_item_list",
        ]

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


class JudgeCallRunFilter(admin.SimpleListFilter):
    """``?run=<id>``: one run's calls (the run's admin page links here); the latest runs with
    calls are offered in the sidebar."""

    title = "run"
    parameter_name = "run"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        latest = list(
            EvaluationRun.objects.filter(judge_calls__isnull=False)
            .distinct()
            .order_by("-id")
            .values_list("pk", flat=True)[:15]
        )
        chosen = self.value()
        chosen_id = whole_number(chosen)
        if chosen_id is not None and chosen_id not in latest:
            latest.insert(0, chosen_id)
        return [(str(pk), f"#{pk}") for pk in latest]

    def queryset(self, request: HttpRequest, queryset: QuerySet[JudgeCall]) -> Any:
        value = self.value()
        if not value:
            return queryset
        if not value.isascii() or not value.isdigit() or len(value) > 18:
            return queryset.none()
        return queryset.filter(run_id=int(value))


def _with_piece(queryset: QuerySet[JudgeCall]) -> QuerySet[JudgeCall]:
    """Each call with the key of the run piece whose lease made it (``holder`` is
    ``<piece id>:<attempt>``): the audit repo it served; empty for a single-piece run."""
    # Greatest: PostgreSQL refuses a negative length where a call has no holder (no ":").
    holder_piece = Substr("holder", 1, Greatest(StrIndex("holder", Value(":")) - 1, Value(0)))
    pieces = RunPiece.objects.annotate(pk_text=Cast("pk", CharField())).filter(
        pk_text=OuterRef("holder_piece")
    )
    return queryset.annotate(holder_piece=holder_piece).annotate(
        piece_key=Subquery(pieces.values("key")[:1]),
        piece_attempt=Subquery(pieces.values("attempt")[:1], output_field=IntegerField()),
    )


NOT_STORED_PROMPT = (
    "Not stored: recorded before the ledger kept prompts, or asked of a judge that sends none "
    "(offline, replay). The prompt's hash (above) is also the key of its cached verdict."
)
# Judges that compute their verdict locally: there is never a server response to keep.
LOCAL_JUDGES = frozenset({"offline", "replay"})
NOT_STORED_RESPONSE = (
    "Not stored: recorded before the ledger kept raw responses. For an answered call the "
    "parsed verdict below is what the judge answered."
)
# A checklist prompt holds a whole paper: the page shows this much of the user text.
PROMPT_SHOWN_CHARS = 20_000


def _pre(text: str) -> str:
    return format_html('<pre style="white-space: pre-wrap; max-height: 40em">{}</pre>', text)


@admin.register(JudgeCall)
class JudgeCallAdmin(ReadOnlyAdmin):
    """The judge ledger: each call with its run, the piece (audit repo) it served, how it
    ended, and the verdict it gave (from the verdict cache, keyed by the prompt's hash)."""

    list_display = (
        "created_at",
        "run_link",
        "item",
        "status",
        "judge",
        "model",
        "vote_number",
        "attempt",
        "latency_ms",
        "tokens_in",
        "tokens_out",
    )
    list_filter = (JudgeCallRunFilter, "status", "judge", "model")
    search_fields = ("prompt_hash", "error")
    list_select_related = ("run",)
    fields = (
        "run_link",
        "item",
        "status",
        "judge",
        "model",
        "vote_number",
        "attempt",
        "created_at",
        "latency_ms",
        "tokens_in",
        "tokens_out",
        "tokens_reasoning",
        "request_options",
        "holder",
        "prompt_hash",
        "error",
        "prompt",
        "raw_answer",
        "parsed_verdict",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[JudgeCall]:
        return _with_piece(super().get_queryset(request))

    @admin.display(description="Run", ordering="run_id")
    def run_link(self, obj: JudgeCall) -> str:
        if obj.run_id is None:
            return "—"
        url = reverse("admin:benchmarks_app_evaluationrun_change", args=[obj.run_id])
        calls = reverse("admin:benchmarks_app_judgecall_changelist") + f"?run={obj.run_id}"
        return format_html(
            '<a href="{}">run #{}</a> · <a href="{}">its calls</a>', url, obj.run_id, calls
        )

    @admin.display(description="Item")
    def item(self, obj: JudgeCall) -> str:
        key = getattr(obj, "piece_key", None)
        attempt = getattr(obj, "piece_attempt", None)
        if key is None:
            return "—"
        where = f"repo {key}" if key else "whole run"
        return f"{where} (lease attempt {attempt})" if attempt else where

    @admin.display(description="Prompt")
    def prompt(self, obj: JudgeCall) -> str:
        stored = JudgePrompt.objects.filter(key=obj.prompt_key).first() if obj.prompt_key else None
        if stored is None:
            return NOT_STORED_PROMPT
        user = stored.user
        notes = []
        if len(user) > PROMPT_SHOWN_CHARS:
            notes.append(
                f"User text cut at {PROMPT_SHOWN_CHARS:,} of {len(user):,} characters "
                f"(prompt {stored.key})."
            )
            user = user[:PROMPT_SHOWN_CHARS]
        if obj.attempt > 1:
            notes.append(
                "A re-ask after an invalid answer sends this question followed by a short "
                "correction note."
            )
        return format_html(
            "<strong>System</strong>{}<strong>User</strong>{}{}",
            _pre(stored.system),
            _pre(user),
            format_html_join("", "<p><em>{}</em></p>", [(n,) for n in notes]),
        )

    @admin.display(description="Request options")
    def request_options(self, obj: JudgeCall) -> str:
        if not obj.request:
            if obj.status == "cached":
                return "None: a cache hit asks no server."
            return "Not recorded (a judge that asks no server, or an older row)."
        rows = [(k, json.dumps(v)) for k, v in sorted(obj.request.items())]
        return format_html(
            "<table>{}</table>", format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows)
        )

    # Not named raw_response: the model's field of that name would be shown instead.
    @admin.display(description="Raw response")
    def raw_answer(self, obj: JudgeCall) -> str:
        if obj.raw_response:
            return _pre(obj.raw_response)
        if obj.status == "cached":
            return "None: a cache hit asks no server (the verdict below is the cached answer)."
        if obj.status in ("pending", "lost"):
            return "None: no answer came back."
        if obj.prompt_key:
            return "Empty: the server returned no text."
        if obj.judge.split(":", 1)[0] in LOCAL_JUDGES:
            return (
                f"None: the {obj.judge.split(':', 1)[0]} judge answers in this process and asks "
                "no server; the parsed verdict below is its answer."
            )
        return NOT_STORED_RESPONSE

    @admin.display(description="Parsed verdict")
    def parsed_verdict(self, obj: JudgeCall) -> str:
        entry = JudgeCacheEntry.objects.filter(key=obj.prompt_hash).first()
        if entry is None:
            return "—" if obj.status not in ("ok", "cached") else "Not in the cache any more."
        text = json.dumps(entry.response, indent=2, sort_keys=True, ensure_ascii=False)
        url = reverse("admin:benchmarks_app_judgecacheentry_change", args=[entry.pk])
        return format_html_join("", '<pre>{}</pre><a href="{}">cache entry</a>', [(text, url)])


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
