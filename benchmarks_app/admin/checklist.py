from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from simple_history.admin import SimpleHistoryAdmin

from benchmarks_app.models import (
    Challenge,
    ChecklistAnswer,
    ChecklistQuestion,
    ChecklistSubmission,
    Membership,
    Paper,
    Team,
)
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    checklist_submission_assess,
)


@admin.register(ChecklistQuestion)
class ChecklistQuestionAdmin(SimpleHistoryAdmin):
    """The checklist questions; "History" lists every edit with who made it."""

    list_display = ("number", "title", "question")
    search_fields = ("title", "question", "guidelines")


@admin.register(Challenge)
class ChallengeAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "is_open", "daily_limit", "total_limit")
    list_filter = ("is_open",)
    prepopulated_fields = {"slug": ("name",)}


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    fields = ("user",)
    raw_id_fields = ("user",)


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "challenge", "created_at")
    list_filter = ("challenge",)
    search_fields = ("name", "members__username", "invite_code")
    readonly_fields = ("invite_code",)
    inlines = [MembershipInline]


class PaperInline(admin.TabularInline):
    model = Paper
    extra = 0
    fields = ("kind", "title", "file", "source_format", "body_words")
    readonly_fields = ("body_words",)
    show_change_link = True


def _queue(request: HttpRequest, queryset: QuerySet[ChecklistSubmission], judge: str) -> None:
    queued = 0
    for submission in queryset:
        try:
            checklist_submission_assess(submission=submission, user=request.user, judge=judge)
            queued += 1
        except ChecklistSubmissionError as exc:
            messages.error(request, f"#{submission.pk}: {exc.message}")
    if queued:
        messages.success(request, f"Queued {queued} assessment run(s) with the {judge} judge.")


@admin.action(description="Assess with the offline judge (appends a new run and score)")
def assess_offline(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[ChecklistSubmission]
) -> None:
    _queue(request, queryset, "offline")


@admin.action(description="Assess with the OpenAI judge (appends a new run and score)")
def assess_openai(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[ChecklistSubmission]
) -> None:
    _queue(request, queryset, "openai")


@admin.register(ChecklistSubmission)
class ChecklistSubmissionAdmin(admin.ModelAdmin):
    list_display = ("id", "team", "kind", "status", "submitted_by", "created_at")
    list_filter = ("status", "kind", "challenge")
    search_fields = ("team__name", "label")
    list_select_related = ("team", "submitted_by")
    inlines = [PaperInline]
    actions = [assess_offline, assess_openai]


class AnswerInline(admin.TabularInline):
    model = ChecklistAnswer
    extra = 0
    fields = ("question", "answer", "raw_answer", "justification")


@admin.register(Paper)
class PaperAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "title", "team", "submission", "body_words")
    list_filter = ("kind", "source_format")
    search_fields = ("title", "team__name")
    list_select_related = ("team", "submission")
    inlines = [AnswerInline]


# --- results (read-only: appended by assessment runs) and curation actions ------------------
