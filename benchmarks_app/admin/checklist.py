from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from simple_history.admin import SimpleHistoryAdmin

from benchmarks_app.admin.phases import PhaseInline
from benchmarks_app.models import (
    Challenge,
    ChecklistAnswer,
    ChecklistQuestion,
    ChecklistSubmission,
    Membership,
    Paper,
    Team,
)
from benchmarks_app.models.boards import ChecklistBoardRow
from benchmarks_app.selectors.judge_records import judge_record_choices
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    checklist_board_refresh,
    checklist_boards_refresh_for_team,
    checklist_submission_assess,
    team_flags_set,
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
    inlines = [PhaseInline]


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    fields = ("user",)
    raw_id_fields = ("user",)


def _set_flags(request: HttpRequest, queryset: QuerySet[Team], **flags: bool) -> None:
    for team in queryset:
        team_flags_set(team=team, **flags)
    messages.success(request, f"Updated {queryset.count()} team(s); their boards were rewritten.")


@admin.action(description="Mark as baseline (ranked, shown with a badge)")
def mark_baseline(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Team]
) -> None:
    _set_flags(request, queryset, is_baseline=True)


@admin.action(description="Unmark baseline")
def unmark_baseline(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Team]
) -> None:
    _set_flags(request, queryset, is_baseline=False)


@admin.action(description="Mark internal (off every public board)")
def mark_internal(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Team]
) -> None:
    _set_flags(request, queryset, is_internal=True)


@admin.action(description="Unmark internal (back on the boards)")
def unmark_internal(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Team]
) -> None:
    _set_flags(request, queryset, is_internal=False)


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "challenge", "owner", "is_internal", "is_baseline", "created_at")
    list_filter = ("challenge", "is_internal", "is_baseline")
    search_fields = ("name", "members__username", "invite_code")
    readonly_fields = ("invite_code",)
    raw_id_fields = ("owner",)
    inlines = [MembershipInline]
    actions = [mark_baseline, unmark_baseline, mark_internal, unmark_internal]

    def save_model(self, request: HttpRequest, obj: Team, form: ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # Internal teams leave the boards and baselines get their badge: rewrite its boards.
        if change and {"is_internal", "is_baseline"} & set(form.changed_data):
            checklist_boards_refresh_for_team(team=obj)


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
    list_display = (
        "id",
        "team",
        "kind",
        "status",
        "phase",
        "board_choice",
        "method_name",
        "submitted_by",
        "created_at",
    )
    list_filter = ("status", "kind", "challenge", "phase", "board_choice")
    search_fields = ("team__name", "label", "method_name")
    list_select_related = ("team", "submitted_by", "phase")
    # The choice is the team's (its members choose on the site); the phase is where it landed.
    readonly_fields = ("board_choice", "phase")
    inlines = [PaperInline]
    actions = [assess_offline, assess_openai]

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        """One more action per curated judge record (a local server, another model)."""
        actions = super().get_actions(request)
        for name, label in judge_record_choices(kinds=("offline", "openai")):
            key = f"assess_with_{name}"
            description = f"Assess with {label} (appends a new run and score)"
            actions[key] = (_assess_with(name), key, description)
        return actions


def _assess_with(name: str) -> Any:
    def action(
        modeladmin: admin.ModelAdmin,
        request: HttpRequest,
        queryset: QuerySet[ChecklistSubmission],
    ) -> None:
        _queue(request, queryset, name)

    return action


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


@admin.action(description="Rebuild these boards from the scores")
def rebuild_boards(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[ChecklistBoardRow]
) -> None:
    boards = {(row.challenge, row.phase) for row in queryset.select_related("challenge", "phase")}
    for challenge, phase in boards:
        checklist_board_refresh(challenge=challenge, phase=phase)
    messages.success(request, f"Rebuilt {len(boards)} board(s).")


@admin.register(ChecklistBoardRow)
class ChecklistBoardRowAdmin(admin.ModelAdmin):
    """Derived rows (rewritten when runs end or choices change): read-only here."""

    list_display = ("challenge", "phase", "team", "submission", "s", "is_baseline")
    list_filter = ("challenge", "phase", "is_baseline")
    search_fields = ("team__name",)
    list_select_related = ("challenge", "phase", "team")
    actions = [rebuild_boards]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
