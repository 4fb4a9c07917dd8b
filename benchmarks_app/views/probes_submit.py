"""The form that submits a model's responses to a probe suite (the same service and messages
as the API)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from benchmarks_app.models import ProbeSuite
from benchmarks_app.selectors.submission_windows import probe_submission_windows
from benchmarks_app.services.probes import (
    ProbeFormatError,
    probe_submission_upload,
)
from benchmarks_app.services.uploads import errors_capped, upload_limit_text
from benchmarks_app.upload_reads import reads_upload
from benchmarks_app.views.entry_fields import method_fields
from benchmarks_app.views.upload_fields import UploadField

FORMAT_CHOICES = [
    ("", "Detect from the file name (.jsonl or .csv)"),
    ("jsonl", "JSONL: one {probe_id, output} object per line"),
    ("xstest", "XSTest completions CSV"),
]


class ResponseSubmissionForm(forms.Form):
    """Only the shape of the request is checked here; everything about the content (which
    suite, which probe ids, outputs) is left to the service so the page says exactly what the
    API says."""

    # A plain text field rendered as a select: an unknown suite name (a stale page) then gets
    # the service's message, not Django's "Select a valid choice".
    suite = forms.CharField(max_length=100, widget=forms.Select)
    model = forms.CharField(
        label="Model name",
        max_length=200,
        help_text="As it should appear on the leaderboard, e.g. gpt-4o-2024-08-06.",
    )
    format = forms.ChoiceField(choices=FORMAT_CHOICES, required=False)
    file = UploadField(
        label="Responses file",
        widget=forms.ClearableFileInput(attrs={"accept": ".jsonl,.json,.ndjson,.csv,.txt"}),
    )
    method_name, method_description, method_url = method_fields()

    def __init__(self, *args: Any, suites: list[tuple[str, int]], **kwargs: Any) -> None:
        """``suites``: (name, number of probes) of the suites that can be answered."""
        super().__init__(*args, **kwargs)
        # The value of the limit, read when the form is built (a setting can change).
        self.fields["file"].help_text = f"UTF-8 text, {upload_limit_text()}."
        self.fields["suite"].widget = forms.Select(
            choices=[("", "Choose a suite…")]
            + [(name, f"{name} ({n} probes)") for name, n in suites]
        )


def _error_field(message: str) -> str:
    """The form field a service message is about: it names the field, else it is the file's."""
    if message.startswith(("field 'suite'", "suite ")):
        return "suite"
    if message.startswith("field 'model'"):
        return "model"
    for name in ("method_name", "method_description", "method_url"):
        if message.startswith(f"field '{name}'"):
            return name
    return "file"


@login_required
@reads_upload
def submit(request: HttpRequest) -> HttpResponse:
    suites = list(
        ProbeSuite.objects.annotate(n_probes=Count("probes"))
        .filter(n_probes__gt=0)
        .order_by("name")
        .values_list("name", "n_probes")
    )
    # The only suite there is is the one meant: chosen already.
    initial = {"suite": request.GET.get("suite", "") or (suites[0][0] if len(suites) == 1 else "")}
    form = ResponseSubmissionForm(
        request.POST or None, request.FILES or None, suites=suites, initial=initial
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = probe_submission_upload(
                suite_name=data["suite"],
                model_name=data["model"],
                upload=data["file"],
                fmt=data["format"] or None,
                owner=request.user,
                method_name=data["method_name"],
                method_description=data["method_description"],
                method_url=data["method_url"],
            )
        except ProbeFormatError as exc:
            # Hundreds of line errors bury the first few: a count stands for the rest.
            for message in errors_capped(exc.errors):
                form.add_error(_error_field(message), message)
        else:
            messages.success(
                request,
                f"Responses of {data['model']} to {data['suite']} received; "
                f"scoring run #{run.pk} is queued.",
            )
            return redirect("probes:submission", pk=run.probe_submission_id)
    return render(
        request,
        "probes/submit.html",
        {
            "form": form,
            "suites": suites,
            "max_mb": settings.UPLOAD_MAX_MB,
            "limit": upload_limit_text(),
            "windows": probe_submission_windows(request.user, [name for name, _ in suites]),
        },
        status=400 if request.method == "POST" else 200,
    )
