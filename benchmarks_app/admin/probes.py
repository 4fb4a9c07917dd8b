from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from simple_history.admin import SimpleHistoryAdmin

from benchmarks_app.models import (
    JudgeRecord,
    PatternRule,
    Probe,
    ProbeSuite,
    Response,
    ResponseSubmission,
)
from benchmarks_app.models.probes import RefusalSignal
from benchmarks_app.selectors.judge_records import judge_record_choices
from benchmarks_app.services.probes import (
    ProbeFormatError,
    RefusalSignalError,
    pattern_rules_install_defaults,
    probe_submission_rescore,
    probe_suite_import,
    probe_suite_train_classifier,
)
from benchmarks_app.services.probes.refusal import suite_classifier
from benchmarks_app.views.upload_fields import UploadField
from scoring.probes.io import detect_format


class ProbeUploadForm(forms.Form):
    suite = forms.CharField(max_length=100, help_text="Created when it does not exist.")
    format = forms.ChoiceField(
        choices=[("", "From the file name"), ("jsonl", "JSONL"), ("xstest", "XSTest CSV")],
        required=False,
    )
    file = UploadField(
        help_text="JSONL: {probe_id, category, severity, task, input, failure_modes, expected} "
        "per line. XSTest: id, prompt, type, label, focus, note."
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    refusal_signal = forms.ChoiceField(
        choices=[("", "Keep (a new suite: the best held out)"), *RefusalSignal.choices],
        required=False,
        help_text="What decides whether a response refuses. The LLM judge is paid per response.",
    )


class ProbeInline(admin.TabularInline):
    model = Probe
    extra = 0
    fields = ("probe_id", "category", "severity", "expected", "input")
    show_change_link = True


@admin.register(ProbeSuite)
class ProbeSuiteAdmin(admin.ModelAdmin):
    list_display = ("name", "probe_count", "refusal_signal", "source", "created_at")
    list_filter = ("refusal_signal",)
    search_fields = ("name", "description")
    fields = ("name", "description", "source", "refusal_signal", "classifier_summary")
    readonly_fields = ("classifier_summary",)
    inlines = [ProbeInline]
    change_list_template = "probes/admin/suite_change_list.html"
    actions = ["train_classifier"]

    @admin.display(description="Refusal classifier")
    def classifier_summary(self, obj: ProbeSuite) -> str:
        """Which classifier the suite's ``classifier`` signal uses, and how it holds out."""
        if obj.pk is None:
            return "—"
        try:
            classifier, origin = suite_classifier(obj)
        except RefusalSignalError as exc:
            return str(exc)
        held = classifier.metadata.get("held_out") or []
        figures = "; ".join(
            f"held-out {r['held_out']}: accuracy {r['classifier']['accuracy']:.3f} "
            f"(string-match {r['string_match']['accuracy']:.3f})"
            for r in held
        )
        return f"{classifier.name} ({origin}, sha256 {classifier.sha256[:12]}). " + (
            figures or "No held-out figures (fewer than two labelled models)."
        )

    @admin.action(description="Train the refusal classifier on the suite's labelled responses")
    def train_classifier(self, request: HttpRequest, queryset: QuerySet[ProbeSuite]) -> None:
        for suite in queryset:
            try:
                classifier, figures = probe_suite_train_classifier(suite=suite)
            except RefusalSignalError as exc:
                messages.error(request, str(exc))
                continue
            worst = min((r["classifier"]["accuracy"] for r in figures), default=None)
            messages.success(
                request,
                f"Suite '{suite.name}': classifier trained (sha256 {classifier.sha256[:12]}), "
                "now its refusal signal; "
                + (
                    f"worst held-out accuracy {worst:.3f}."
                    if worst is not None
                    else "one labelled model only, so no held-out figure."
                ),
            )

    def get_urls(self) -> list[URLPattern]:
        custom = [
            path(
                "upload/",
                self.admin_site.admin_view(self.upload_view),
                name="benchmarks_app_probesuite_upload",
            )
        ]
        return custom + super().get_urls()

    def upload_view(self, request: HttpRequest) -> HttpResponse:
        """Import probes from a file; nothing is written when any line is wrong."""
        if not self.has_add_permission(request):
            messages.error(request, "You may not add probes.")
            return HttpResponseRedirect(reverse("admin:benchmarks_app_probesuite_changelist"))
        form = ProbeUploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            try:
                text = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                form.add_error("file", f"{upload.name}: not UTF-8 text")
            else:
                fmt = form.cleaned_data["format"] or detect_format(upload.name, text)
                try:
                    result = probe_suite_import(
                        name=form.cleaned_data["suite"],
                        text=text,
                        fmt=fmt,
                        source_name=upload.name,
                        description=form.cleaned_data["description"],
                        refusal_signal=form.cleaned_data["refusal_signal"] or None,
                    )
                except ProbeFormatError as exc:
                    for error in exc.errors[:50]:
                        form.add_error("file", error)
                else:
                    messages.success(
                        request,
                        f"Suite '{result.suite.name}': {result.created} probe(s) created, "
                        f"{result.updated} updated.",
                    )
                    return HttpResponseRedirect(
                        reverse("admin:benchmarks_app_probesuite_change", args=[result.suite.pk])
                    )
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "form": form,
            "title": "Upload probes",
        }
        return TemplateResponse(request, "probes/admin/upload.html", context)

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
class PatternRuleAdmin(SimpleHistoryAdmin):
    """Curated rules; "History" lists every change with who made it (django-simple-history).

    A change never alters a finished run (its rules are frozen on it) and starts a new suite
    version on the board for runs scored after it.
    """

    list_display = ("label", "kind", "weight", "failure_mode", "active", "regex")
    list_filter = ("kind", "active", "failure_mode")
    list_editable = ("active", "weight")
    search_fields = ("label", "regex", "description")
    actions = ["install_defaults"]

    @admin.action(description="Add the default rules that are missing (keeps curated ones)")
    def install_defaults(self, request: HttpRequest, queryset: QuerySet[PatternRule]) -> None:
        created = pattern_rules_install_defaults(only_if_empty=False)
        messages.success(request, f"{created} default rule(s) added.")


def _rescore_with(name: str) -> Any:
    def action(
        modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[ResponseSubmission]
    ) -> None:
        record = JudgeRecord.objects.filter(name=name).first()
        if record is None:
            messages.error(request, f"No judge record {name!r} any more.")
            return
        runs = [
            probe_submission_rescore(submission=s, created_by=request.user, judge_record=record)
            for s in queryset
        ]
        messages.success(request, f"Queued {len(runs)} run(s) judged by {name}.")

    return action


@admin.register(ResponseSubmission)
class ResponseSubmissionAdmin(admin.ModelAdmin):
    list_display = ("model_name", "suite", "owner", "response_count", "created_at")
    list_filter = ("suite",)
    search_fields = ("model_name",)
    list_select_related = ("suite", "owner")
    actions = ["rescore"]

    @admin.action(description="Score again with the current rules (appends a new run)")
    def rescore(self, request: HttpRequest, queryset: QuerySet[ResponseSubmission]) -> None:
        runs = [probe_submission_rescore(submission=s, created_by=request.user) for s in queryset]
        messages.success(request, f"Queued {len(runs)} run(s).")

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        """One more action per curated LLM judge record: refusals judged by it."""
        actions = super().get_actions(request)
        for name, label in judge_record_choices(kinds=("openai",)):
            key = f"rescore_with_{name}"
            description = f"Score again, refusals judged by {label} (appends a new run)"
            actions[key] = (_rescore_with(name), key, description)
        return actions

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
