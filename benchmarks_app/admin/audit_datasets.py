"""Audit datasets, their releases and boards in the admin.

Maintainers create a release (a snapshot of the current truth of the dataset's repos) and
publish it with the actions here, mark the official release and judge (the board the site and
API show first). Published releases never change: their
truth is read-only and they cannot be deleted.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from benchmarks_app.models.audit import AuditDataset, DatasetRelease
from benchmarks_app.selectors.audit_boards import official_judge, release_judges
from benchmarks_app.services.audit import (
    AuditRunError,
    DatasetError,
    audit_release_create,
    audit_release_evaluate_entries,
    audit_release_make_official,
    audit_release_publish,
)


class AuditDatasetForm(forms.ModelForm):
    class Meta:
        model = AuditDataset
        fields = ["slug", "name", "description", "repos", "official_release", "official_judge"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        releases = DatasetRelease.objects.filter(is_published=True)
        if self.instance.pk:
            releases = releases.filter(dataset=self.instance)
            judges = sorted({j for r in self.instance.releases.all() for j in release_judges(r)})
            if judges:
                self.fields["official_judge"].help_text = (
                    "The judge whose board the site shows first. Judges with boards: "
                    + ", ".join(judges)
                )
        else:
            releases = releases.none()
        self.fields["official_release"].queryset = releases  # type: ignore[attr-defined]


@admin.register(AuditDataset)
class AuditDatasetAdmin(admin.ModelAdmin):
    form = AuditDatasetForm
    list_display = ("slug", "name", "official_release", "official_judge_shown", "repo_count")
    search_fields = ("slug", "name")
    filter_horizontal = ("repos",)
    actions = ["create_release"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditDataset]:
        return (
            super()
            .get_queryset(request)
            .select_related("official_release")
            .annotate(_repos=Count("repos", distinct=True))
        )

    # The judge the board shows first, as the board says it: a blank field means the default.
    @admin.display(description="Official judge", ordering="official_judge")
    def official_judge_shown(self, obj: AuditDataset) -> str:
        if obj.official_judge:
            return obj.official_judge
        release = obj.official_release
        judges = release_judges(release) if release is not None else []
        return f"{official_judge(obj, judges)} (the default)"

    @admin.display(description="Repos", ordering="_repos")
    def repo_count(self, obj: AuditDataset) -> int:
        return getattr(obj, "_repos", 0)

    @admin.action(description="Create a release (snapshot of the current truth; publish it next)")
    def create_release(self, request: HttpRequest, queryset: QuerySet[AuditDataset]) -> None:
        for dataset in queryset:
            try:
                release = audit_release_create(dataset=dataset)
            except DatasetError as exc:
                self.message_user(request, str(exc), messages.ERROR)
                continue
            self.message_user(
                request,
                f"Created {release} ({release.truth_findings.count()} truth findings, "
                f"{release.repos.count()} repos), not published yet.",
                messages.SUCCESS,
            )


@admin.register(DatasetRelease)
class DatasetReleaseAdmin(admin.ModelAdmin):
    list_display = (
        "__str__",
        "dataset",
        "number",
        "is_published",
        "published_at",
        "truth_count",
        "is_official",
    )
    list_filter = ("is_published", "dataset")
    readonly_fields = (
        "dataset",
        "number",
        "is_published",
        "published_at",
        "truth_count",
        "repo_list",
    )
    fields = (*readonly_fields, "notes")
    actions = ["publish", "make_official", "evaluate_entries"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Releases are snapshots made by the dataset's "Create a release" action.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.is_published:
            return False
        return super().has_delete_permission(request, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[DatasetRelease]:
        return (
            super()
            .get_queryset(request)
            .select_related("dataset")
            .annotate(_truth=Count("truth_findings", distinct=True))
        )

    @admin.display(description="Truth findings", ordering="_truth")
    def truth_count(self, obj: DatasetRelease) -> int:
        return getattr(obj, "_truth", None) or obj.truth_findings.count()

    @admin.display(description="Repos")
    def repo_list(self, obj: DatasetRelease) -> str:
        return ", ".join(obj.repos.order_by("project_id").values_list("project_id", flat=True))

    @admin.display(description="Official", boolean=True)
    def is_official(self, obj: DatasetRelease) -> bool:
        return obj.dataset.official_release_id == obj.pk

    @admin.action(description="Publish (freeze its truth for good)")
    def publish(self, request: HttpRequest, queryset: QuerySet[DatasetRelease]) -> None:
        for release in queryset:
            try:
                audit_release_publish(release=release)
            except DatasetError as exc:
                self.message_user(request, str(exc), messages.ERROR)
            else:
                self.message_user(request, f"Published {release}.", messages.SUCCESS)

    @admin.action(description="Make official (the site and API show its boards first)")
    def make_official(self, request: HttpRequest, queryset: QuerySet[DatasetRelease]) -> None:
        for release in queryset:
            try:
                audit_release_make_official(release=release)
            except DatasetError as exc:
                self.message_user(request, str(exc), messages.ERROR)
            else:
                self.message_user(
                    request,
                    f"{release} is official now. Its board fills as its entries are "
                    "evaluated: use 'Evaluate the current entries' to queue them.",
                    messages.SUCCESS,
                )

    @admin.action(description="Evaluate the current entries (with the official judge)")
    def evaluate_entries(self, request: HttpRequest, queryset: QuerySet[DatasetRelease]) -> None:
        for release in queryset:
            try:
                outcome = audit_release_evaluate_entries(release=release, created_by=request.user)
            except AuditRunError as exc:
                self.message_user(request, str(exc), messages.ERROR)
            else:
                self.message_user(request, outcome.summary(), messages.SUCCESS)
