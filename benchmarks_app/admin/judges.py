"""Judge records: curated like ground truth; "Check" asks each selected judge one probe call."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from benchmarks_app.models import JudgeRecord
from benchmarks_app.selectors.judge_agreement import judge_agreement
from benchmarks_app.services.judge_records import (
    JudgeRecordError,
    judge_probe_summary,
    judge_record_check,
)


@admin.register(JudgeRecord)
class JudgeRecordAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "model", "base_url", "api_key_env", "probed_at")
    list_filter = ("kind",)
    search_fields = ("name", "model", "base_url")
    readonly_fields = ("agreement", "probe", "probed_at", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "kind", "base_url", "model", "api_key_env")}),
        (
            "Request options (blank: the site's settings)",
            {"fields": ("max_answer_tokens", "temperature", "concurrency", "timeout_s")},
        ),
        ("Agreement with curated verdicts", {"fields": ("agreement",)}),
        ("Last check", {"fields": ("probe", "probed_at", "created_at", "updated_at")}),
    )
    actions = ["check_judges"]

    @admin.display(description="Agreement")
    def agreement(self, obj: JudgeRecord) -> SafeString:
        figures = judge_agreement(obj.name) if obj.pk else []
        return SafeString(
            render_to_string("judging/admin/_agreement.html", {"figures": figures, "judge": obj})
        )

    @admin.action(description="Check selected judges (one probe call each)")
    def check_judges(self, request: HttpRequest, queryset: QuerySet[JudgeRecord]) -> None:
        for record in queryset:
            try:
                found = judge_record_check(record=record)
            except JudgeRecordError as exc:
                self.message_user(request, f"{record.name}: {exc}", messages.WARNING)
                continue
            level = messages.SUCCESS if found.get("ok") else messages.ERROR
            self.message_user(request, f"{record.name}: {judge_probe_summary(found)}", level)
