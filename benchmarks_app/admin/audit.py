from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import URLPattern, path, reverse
from simple_history.admin import SimpleHistoryAdmin

from benchmarks_app.models import Repo, ScanFinding, Scanner, ScanResult, TruthFinding
from benchmarks_app.selectors.judge_records import judge_record_choices
from benchmarks_app.services.audit import (
    AuditRunError,
    DatasetError,
    audit_import_uploads,
    audit_run_create,
    audit_scan_result_make_current,
    audit_truth_finding_edit,
)
from benchmarks_app.services.audit.datasets import TRUTH_EDITABLE_FIELDS, is_frozen


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> Any:
        # Empty files are not a form error: the import reports them by name and goes on.
        files = [f for f in (data if isinstance(data, list | tuple) else [data]) if f]
        if not files:
            raise forms.ValidationError("Choose at least one JSON file.")
        return files


class AuditUploadForm(forms.Form):
    files = MultipleFileField(  # type: ignore[assignment]
        help_text="JSON files; several at once are fine."
    )
    kind = forms.ChoiceField(
        choices=[
            ("auto", "Detect from each file"),
            ("projects", "List of projects with vulnerabilities"),
            ("repo", "Repo description (repos/<id>.json)"),
            ("truth", "Ground truth (source_of_truth/<id>.json)"),
            ("scan", "Scanner results (<repo>_results.json)"),
        ],
        initial="auto",
    )
    scanner = forms.CharField(
        required=False, help_text="Needed for scanner results: the scanner's name."
    )
    dataset = forms.SlugField(
        required=False,
        help_text="Dataset the imported repos join (created if new; a dataset without a "
        "published release gets SLUG@1, published and official).",
    )
    overwrite = forms.BooleanField(
        required=False,
        help_text="Replace truth fields edited in the admin with the files' values "
        "(otherwise they are kept and listed as conflicts).",
    )


def judge_choices() -> list[tuple[str, str]]:
    choices = [("offline", "offline (TF-IDF, no network, free)")]
    if getattr(settings, "OPENAI_API_KEY", "") or getattr(settings, "OPENAI_BASE_URL", None):
        choices.append(("openai", "openai (LLM judge; costs API calls)"))
    choices.append(("replay", "replay (recorded verdicts from a folder)"))
    # Curated judge records: a local server, another model, a recording kept by name.
    return choices + judge_record_choices(kinds=("offline", "openai", "replay"))


class EvaluateForm(forms.Form):
    scanner = forms.ModelChoiceField(queryset=Scanner.objects.all())
    judge = forms.ChoiceField(choices=judge_choices)
    replay_dir = forms.CharField(required=False, help_text="Folder of <repo>_results.json")
    model = forms.CharField(required=False, help_text="openai only; default JUDGE_MODEL")
    iterations = forms.IntegerField(min_value=1, max_value=9, required=False)
    batch_size = forms.IntegerField(min_value=1, max_value=100, required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("judge") == "replay" and not data.get("replay_dir"):
            self.add_error("replay_dir", "The replay judge needs a folder.")
        return data

    @property
    def judge_spec(self) -> str:
        judge = self.cleaned_data["judge"]
        return f"replay:{self.cleaned_data['replay_dir']}" if judge == "replay" else judge


class TruthFindingInline(admin.TabularInline):
    """The repo's current truth findings; edits go through the finding's own page, so that a
    finding a published release contains becomes a new version instead of changing."""

    model = TruthFinding
    extra = 0
    fields = ("order", "finding_id", "severity", "title", "category")
    readonly_fields = fields
    show_change_link = True
    can_delete = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[TruthFinding]:
        return super().get_queryset(request).filter(is_current=True)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Repo)
class RepoAdmin(admin.ModelAdmin):
    list_display = ("project_id", "name", "platform", "is_public", "truth_count", "scan_count")
    list_filter = ("platform", "is_public")
    search_fields = ("project_id", "name", "repository_url")
    inlines = [TruthFindingInline]
    actions = ["evaluate_with"]
    change_list_template = "audit/admin/repo_change_list.html"

    def get_urls(self) -> list[URLPattern]:
        extra = [
            path(
                "import/",
                self.admin_site.admin_view(self.import_view),
                name="benchmarks_app_repo_import",
            )
        ]
        return extra + super().get_urls()

    def import_view(self, request: HttpRequest) -> HttpResponse:
        """Upload audit data (any accepted shape); bad files are listed and skipped."""
        if not self.has_add_permission(request):
            return HttpResponseRedirect(reverse("admin:benchmarks_app_repo_changelist"))
        form = AuditUploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            try:
                report = audit_import_uploads(
                    files=[(f.name, f.read()) for f in form.cleaned_data["files"]],
                    kind=form.cleaned_data["kind"],
                    scanner=form.cleaned_data["scanner"].strip(),
                    owner=request.user,
                    dataset=form.cleaned_data["dataset"] or None,
                    overwrite=form.cleaned_data["overwrite"],
                )
            except DatasetError as exc:
                self.message_user(request, str(exc), messages.ERROR)
                return HttpResponseRedirect(reverse("admin:benchmarks_app_repo_import"))
            for problem in report.problems:
                self.message_user(
                    request, f"Skipped {problem.path}: {problem.reason}", messages.WARNING
                )
            for conflict in report.conflicts:
                self.message_user(
                    request,
                    f"Kept your edit (tick overwrite to take the file's): {conflict}",
                    messages.WARNING,
                )
            if report.truth_versioned:
                self.message_user(
                    request,
                    f"{report.truth_versioned} changed truth finding(s) are in a published "
                    "release: each is a new version for the next release.",
                    messages.INFO,
                )
            self.message_user(request, f"Imported: {report.summary()}", messages.SUCCESS)
            return HttpResponseRedirect(reverse("admin:benchmarks_app_repo_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "title": "Import audit data",
            "form": form,
            "opts": self.model._meta,
        }
        return render(request, "audit/admin/import.html", context)

    @admin.action(description="Evaluate with…")
    def evaluate_with(self, request: HttpRequest, queryset: QuerySet[Repo]) -> HttpResponse | None:
        """Pick a scanner and a judge, then queue a run over the selected repos."""
        form = EvaluateForm(request.POST if "evaluate" in request.POST else None)
        if "evaluate" in request.POST and form.is_valid():
            scanner = form.cleaned_data["scanner"]
            covered = set(
                scanner.scan_results.filter(is_current=True).values_list("repo_id", flat=True)
            )
            repos = [r for r in queryset if r.pk in covered]
            skipped = [r.project_id for r in queryset if r.pk not in covered]
            if skipped:
                self.message_user(
                    request,
                    f"{scanner.name} has no results for {', '.join(skipped)}; skipped.",
                    messages.WARNING,
                )
            if not repos:
                self.message_user(request, "Nothing to evaluate.", messages.ERROR)
                return None
            try:
                run = audit_run_create(
                    scanner=scanner,
                    repos=repos,
                    judge=form.judge_spec,
                    model=form.cleaned_data["model"] or None,
                    iterations=form.cleaned_data["iterations"],
                    batch_size=form.cleaned_data["batch_size"],
                    created_by=request.user,
                )
            except AuditRunError as exc:
                self.message_user(request, str(exc), messages.ERROR)
                return None
            self.message_user(
                request,
                f"Queued run #{run.pk}: {scanner.name} on {len(repos)} repo(s) with "
                f"judge {run.judge_label}.",
                messages.SUCCESS,
            )
            return HttpResponseRedirect(
                reverse("admin:benchmarks_app_evaluationrun_change", args=[run.pk])
            )
        context = {
            **self.admin_site.each_context(request),
            "title": "Evaluate with…",
            "form": form,
            "repos": queryset,
            "opts": self.model._meta,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return render(request, "audit/admin/evaluate.html", context)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Repo]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                _truth=Count(
                    "truth_findings", filter=Q(truth_findings__is_current=True), distinct=True
                ),
                _scans=Count(
                    "scan_results", filter=Q(scan_results__is_current=True), distinct=True
                ),
            )
        )

    @admin.display(description="Truth findings", ordering="_truth")
    def truth_count(self, obj: Repo) -> int:
        return getattr(obj, "_truth", 0)

    @admin.display(description="Scanners with results", ordering="_scans")
    def scan_count(self, obj: Repo) -> int:
        return getattr(obj, "_scans", 0)


@admin.register(TruthFinding)
class TruthFindingAdmin(SimpleHistoryAdmin):
    """Curated ground truth, with its change history (django-simple-history: every save is a
    historical row with the user and the reason, shown under "History").

    Saving goes through :func:`audit_truth_finding_edit`: a finding that a published release
    contains is never changed; the edit becomes a new version (the next release's), and the
    page moves to it. Edited fields are remembered, so a re-import keeps them.
    """

    list_display = (
        "finding_id",
        "repo",
        "severity",
        "title",
        "category",
        "order",
        "is_current",
        "edited",
    )
    list_filter = ("is_current", "severity", "repo__platform", "repo")
    search_fields = ("finding_id", "title", "description", "repo__project_id")
    list_select_related = ("repo",)
    readonly_fields = ("is_current", "supersedes", "edited_fields", "in_releases")

    @admin.display(description="Edited", boolean=True)
    def edited(self, obj: TruthFinding) -> bool:
        return bool(obj.edited_fields)

    @admin.display(description="In releases")
    def in_releases(self, obj: TruthFinding) -> str:
        releases = [str(r) + ("" if r.is_published else " (draft)") for r in obj.releases.all()]
        return ", ".join(releases) or "—"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return self.readonly_fields
        if not obj.is_current:
            # An earlier version: what the releases and runs that used it saw.
            return [f.name for f in obj._meta.fields] + ["in_releases"]
        return [*self.readonly_fields, "repo", "finding_id"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and (not obj.is_current or is_frozen(obj)):
            return False
        return super().has_delete_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not change:
            super().save_model(request, obj, form, change)
            return
        original = TruthFinding.objects.get(pk=obj.pk)
        changes = {
            name: getattr(obj, name) for name in form.changed_data if name in TRUTH_EDITABLE_FIELDS
        }
        saved = audit_truth_finding_edit(finding=original, changes=changes)
        if saved.pk != original.pk:
            request._truth_new_version = saved  # type: ignore[attr-defined]
            obj.refresh_from_db()

    def response_change(self, request: HttpRequest, obj: Any) -> HttpResponse:
        new = getattr(request, "_truth_new_version", None)
        if new is None:
            return super().response_change(request, obj)
        self.message_user(
            request,
            f"{obj.finding_id} is in a published release, which never changes: your edit is "
            f"a new version (#{new.pk}) that the next release will contain.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(
            reverse("admin:benchmarks_app_truthfinding_change", args=[new.pk])
        )


class ScanFindingInline(admin.TabularInline):
    model = ScanFinding
    extra = 0
    fields = ("index", "severity", "title", "file", "location", "confidence")
    readonly_fields = fields
    show_change_link = True
    can_delete = False


@admin.register(Scanner)
class ScannerAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "is_baseline", "created_at")
    list_filter = ("is_baseline",)
    search_fields = ("name", "description")


@admin.register(ScanResult)
class ScanResultAdmin(admin.ModelAdmin):
    """Versions of a scanner's results: imports add them, runs judge them; never edited."""

    list_display = (
        "scanner",
        "repo",
        "version",
        "is_current",
        "finding_count",
        "run_count",
        "source_name",
        "created_at",
    )
    list_filter = ("is_current", "scanner")
    search_fields = ("repo__project_id", "scanner__name", "content_hash")
    list_select_related = ("scanner", "repo")
    readonly_fields = (
        "scanner",
        "repo",
        "version",
        "is_current",
        "content_hash",
        "source_name",
        "raw_metadata",
        "created_at",
        "updated_at",
    )
    inlines = [ScanFindingInline]
    actions = ["make_current"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Versions come from imports and submissions, which hash and number them.
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[ScanResult]:
        return (
            super()
            .get_queryset(request)
            .annotate(_n=Count("findings", distinct=True), _runs=Count("run_scans", distinct=True))
        )

    @admin.display(description="Findings", ordering="_n")
    def finding_count(self, obj: ScanResult) -> int:
        return getattr(obj, "_n", 0)

    @admin.display(description="Runs", ordering="_runs")
    def run_count(self, obj: ScanResult) -> int:
        return getattr(obj, "_runs", 0)

    @admin.action(description="Make current (new runs and the leaderboard use it)")
    def make_current(self, request: HttpRequest, queryset: QuerySet[ScanResult]) -> None:
        chosen: dict[tuple[int, int], ScanResult] = {}
        for result in queryset.order_by("version"):
            chosen[(result.scanner_id, result.repo_id)] = result
        if len(chosen) < queryset.count():
            self.message_user(
                request,
                "Several versions of the same scanner and repo were selected; the newest of "
                "them is made current.",
                messages.WARNING,
            )
        for result in chosen.values():
            audit_scan_result_make_current(scan_result=result)
        self.message_user(
            request,
            "Current now: " + ", ".join(str(r) for r in chosen.values()),
            messages.SUCCESS,
        )


@admin.register(ScanFinding)
class ScanFindingAdmin(admin.ModelAdmin):
    """A version's findings are what its runs judged, so they are read-only."""

    list_display = ("index", "title", "severity", "raw_severity", "category", "scan_result")
    list_filter = ("severity", "scan_result__is_current", "category", "scan_result__scanner")
    search_fields = ("title", "description", "file", "location")
    list_select_related = ("scan_result__scanner", "scan_result__repo")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# The dataset and release admins register themselves on import.
from benchmarks_app.admin import audit_datasets  # noqa: E402, F401
