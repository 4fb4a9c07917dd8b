"""The audit form that submits a scanner's results for every repo of a dataset at once (the
same service and messages as the API)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from benchmarks_app.models.audit import AuditDataset
from benchmarks_app.selectors.audit_boards import published_release, release_repos
from benchmarks_app.selectors.submission_windows import audit_submission_windows
from benchmarks_app.services.audit import (
    audit_dataset_upload,
    parse_declared_empty,
)
from benchmarks_app.upload_reads import reads_upload
from benchmarks_app.views.audit_common import judge_choices, upload_answer
from benchmarks_app.views.entry_fields import method_fields


def _datasets() -> list[tuple[AuditDataset, Any]]:
    out = []
    for dataset in AuditDataset.objects.order_by("slug"):
        release = published_release(dataset)
        if release is not None:
            out.append((dataset, release))
    return out


class DatasetSubmissionForm(forms.Form):
    """Only the request's shape is checked here; the service checks the rest, as for the API."""

    dataset = forms.CharField(max_length=100, widget=forms.Select)
    scanner = forms.CharField(
        label="Scanner name",
        max_length=200,
        help_text="As it should appear on the board. The first submission of a name makes it "
        "yours; only you can replace its results.",
    )
    judge = forms.CharField(required=False, widget=forms.Select, initial="offline")
    declared_empty = forms.CharField(
        required=False,
        label="Repos where your tool found nothing",
        help_text="Project ids, separated by commas or spaces. Every other repo of the "
        "dataset needs findings in the upload.",
    )
    confirm_untitled = forms.BooleanField(
        required=False,
        label="Keep findings without title and description",
        help_text="Such findings are refused unless you confirm that your tool reported them so.",
    )
    method_name, method_description, method_url = method_fields()
    file = forms.FileField(
        label="Results (.zip or .json)",
        allow_empty_file=True,
        widget=forms.ClearableFileInput(attrs={"accept": ".zip,.json,application/zip"}),
    )

    def __init__(self, *args: Any, datasets: list[tuple[str, str]], user: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["dataset"].widget = forms.Select(choices=[("", "Choose a dataset…"), *datasets])
        self.fields["judge"].widget = forms.Select(choices=judge_choices(user))
        self.fields["file"].help_text = (
            "A .zip of <project_id>_results.json files, or one JSON object "
            f"{{project_id: findings, ...}}; at most {settings.UPLOAD_MAX_MB} MB."
        )


@login_required
@reads_upload
def submit_dataset(request: HttpRequest) -> HttpResponse:
    datasets = _datasets()
    choices = [
        (d.slug, f"{d.slug} (release {r.number}, {len(release_repos(r))} repos)")
        for d, r in datasets
    ]
    form = DatasetSubmissionForm(
        request.POST or None,
        request.FILES or None,
        datasets=choices,
        user=request.user,
        initial={
            # The only dataset there is is the one meant: chosen already (issue 37 item 8).
            "dataset": request.GET.get("dataset", "")
            or (datasets[0][0].slug if len(datasets) == 1 else ""),
            "scanner": request.GET.get("scanner", ""),
        },
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        dataset = AuditDataset.objects.filter(slug=data["dataset"]).first()
        if dataset is None:
            form.add_error("dataset", f"no dataset {data['dataset']!r}")
        else:
            answer = upload_answer(
                request,
                form,
                lambda: audit_dataset_upload(
                    user=request.user,
                    scanner_name=data["scanner"],
                    dataset=dataset,
                    upload=data["file"],
                    declared_empty=parse_declared_empty(data["declared_empty"]),
                    judge=data["judge"] or None,
                    confirm_untitled=bool(data.get("confirm_untitled")),
                    method_name=data.get("method_name", ""),
                    method_description=data.get("method_description", ""),
                    method_url=data.get("method_url", ""),
                ),
                lambda run: (
                    f"Results of {data['scanner'].strip()} for {run.repos.count()} repos of "
                    f"{run.release} received; evaluation run #{run.pk} is queued."
                ),
            )
            if answer is not None:
                return answer
    example = datasets[0][0].slug if datasets else "DATASET"
    return render(
        request,
        "audit/submit_dataset.html",
        {
            "form": form,
            "datasets": datasets,
            "max_mb": settings.UPLOAD_MAX_MB,
            "example_dataset": example,
            "windows": audit_submission_windows(request.user),
        },
        status=400 if request.method == "POST" else 200,
    )
