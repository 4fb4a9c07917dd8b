from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from benchmarks_app.models import PatternRule, Probe, ProbeSuite, Response, ResponseSubmission


class ProbeInline(admin.TabularInline):
    model = Probe
    extra = 0
    fields = ("probe_id", "category", "severity", "expected", "input")
    show_change_link = True


@admin.register(ProbeSuite)
class ProbeSuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "probe_count", "source", "created_at")
    search_fields = ("name", "description")
    inlines = [ProbeInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ProbeSuite]:
        return super().get_queryset(request).annotate(_n=Count("probes"))

    @admin.display(description="Probes", ordering="_n")
    def probe_count(self, obj: ProbeSuite) -> int:
        return getattr(obj, "_n", 0)


@admin.register(Probe)
class ProbeAdmin(admin.ModelAdmin):
    list_display = ("probe_id", "suite", "category", "severity", "expected")
    list_filter = ("suite", "severity", "expected", "category")
    search_fields = ("probe_id", "input", "task")
    list_select_related = ("suite",)


@admin.register(PatternRule)
class PatternRuleAdmin(admin.ModelAdmin):
    list_display = ("label", "kind", "weight", "failure_mode", "active", "regex")
    list_filter = ("kind", "active", "failure_mode")
    list_editable = ("active", "weight")
    search_fields = ("label", "regex", "description")


@admin.register(ResponseSubmission)
class ResponseSubmissionAdmin(admin.ModelAdmin):
    list_display = ("model_name", "suite", "owner", "response_count", "created_at")
    list_filter = ("suite",)
    search_fields = ("model_name",)
    list_select_related = ("suite", "owner")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ResponseSubmission]:
        return super().get_queryset(request).annotate(_n=Count("responses"))

    @admin.display(description="Responses", ordering="_n")
    def response_count(self, obj: ResponseSubmission) -> int:
        return getattr(obj, "_n", 0)


@admin.register(Response)
class ResponseAdmin(admin.ModelAdmin):
    list_display = ("probe", "submission", "human_label")
    list_filter = ("submission__suite", "human_label")
    search_fields = ("probe__probe_id", "output")
    list_select_related = ("probe__suite", "submission__suite")
    raw_id_fields = ("probe", "submission")
