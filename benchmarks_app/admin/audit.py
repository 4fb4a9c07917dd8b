from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from benchmarks_app.models import Repo, ScanFinding, Scanner, ScanResult, TruthFinding


class TruthFindingInline(admin.TabularInline):
    model = TruthFinding
    extra = 0
    fields = ("order", "finding_id", "severity", "title", "category")
    show_change_link = True


@admin.register(Repo)
class RepoAdmin(admin.ModelAdmin):
    list_display = ("project_id", "name", "platform", "is_public", "truth_count", "scan_count")
    list_filter = ("platform", "is_public")
    search_fields = ("project_id", "name", "repository_url")
    inlines = [TruthFindingInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Repo]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                _truth=Count("truth_findings", distinct=True),
                _scans=Count("scan_results", distinct=True),
            )
        )

    @admin.display(description="Truth findings", ordering="_truth")
    def truth_count(self, obj: Repo) -> int:
        return getattr(obj, "_truth", 0)

    @admin.display(description="Scan results", ordering="_scans")
    def scan_count(self, obj: Repo) -> int:
        return getattr(obj, "_scans", 0)


@admin.register(TruthFinding)
class TruthFindingAdmin(admin.ModelAdmin):
    list_display = ("finding_id", "repo", "severity", "title", "category", "order")
    list_filter = ("severity", "repo__platform", "repo")
    search_fields = ("finding_id", "title", "description", "repo__project_id")
    list_select_related = ("repo",)


class ScanFindingInline(admin.TabularInline):
    model = ScanFinding
    extra = 0
    fields = ("index", "severity", "title", "file", "location", "confidence")
    readonly_fields = fields
    show_change_link = True
    can_delete = False


@admin.register(Scanner)
class ScannerAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "created_at")
    search_fields = ("name", "description")


@admin.register(ScanResult)
class ScanResultAdmin(admin.ModelAdmin):
    list_display = ("scanner", "repo", "finding_count", "source_name", "updated_at")
    list_filter = ("scanner",)
    search_fields = ("repo__project_id", "scanner__name")
    list_select_related = ("scanner", "repo")
    inlines = [ScanFindingInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ScanResult]:
        return super().get_queryset(request).annotate(_n=Count("findings"))

    @admin.display(description="Findings", ordering="_n")
    def finding_count(self, obj: ScanResult) -> int:
        return getattr(obj, "_n", 0)


@admin.register(ScanFinding)
class ScanFindingAdmin(admin.ModelAdmin):
    list_display = ("index", "title", "severity", "raw_severity", "category", "scan_result")
    list_filter = ("severity", "category", "scan_result__scanner")
    search_fields = ("title", "description", "file", "location")
    list_select_related = ("scan_result__scanner", "scan_result__repo")
