"""Judge records: curated like ground truth; "Check" asks each selected judge one probe call."""

from __future__ import annotations

from typing import Any

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


def confusion_heatmap(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """The confusion matrix (rows: the curated verdict, columns: the judge's) as table rows whose
    cells carry a shade from 0 to 1 (count / largest count): a heat map drawn by the server with
    style attributes only, which the site's Content-Security-Policy allows (no script, no CDN)."""
    classes = list(figures.get("classes") or [])
    confusion = figures.get("confusion") or {}
    top = max((int(n) for row in confusion.values() for n in row.values()), default=0)
    rows = []
    for curated in classes:
        total = sum(int(n) for n in (confusion.get(curated) or {}).values())
        cells = []
        for judged in classes:
            count = int((confusion.get(curated) or {}).get(judged, 0))
            shade = count / top if top else 0.0
            cells.append(
                {
                    "judge": judged,
                    "count": count,
                    "agrees": judged == curated,
                    # Two decimals: the colour steps a reader can tell apart.
                    "alpha": f"{0.08 + 0.82 * shade:.2f}" if count else "0",
                    "dark": shade > 0.55,
                    "share": count / total if total else None,
                }
            )
        rows.append({"curated": curated, "cells": cells, "total": total})
    return rows


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
        figures = [
            {**f, "heatmap": confusion_heatmap(f)}
            for f in (judge_agreement(obj.name) if obj.pk else [])
        ]
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
