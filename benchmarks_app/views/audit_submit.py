"""The audit form that submits a scanner's results for one repo (the same service and
messages as the API)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from benchmarks_app.selectors.submission_windows import audit_submission_windows
from benchmarks_app.selectors.visibility import visible_repos
from benchmarks_app.services.audit import audit_scan_upload
from benchmarks_app.upload_reads import reads_upload
from benchmarks_app.views.audit_common import judge_choices, upload_answer
from benchmarks_app.views.entry_fields import method_fields


class ScanSubmissionForm(forms.Form):
    """Only the shape of the request is checked here; the repo is looked up and everything
    else (scanner name and owner, judge, file size and content) is left to the service that
    the API calls, so the page says exactly what the API says."""

    # Plain text fields rendered as selects: a stale page (a repo or judge no longer offered)
    # then gets the service's message, not Django's "Select a valid choice".
    repo = forms.CharField(max_length=200, widget=forms.Select)
    scanner = forms.CharField(
        label="Scanner name",
        max_length=200,
        help_text="As it should appear on the leaderboard, e.g. my-auditor-v2. The first "
        "submission of a name makes it yours; only you can replace its results.",
    )
    # Left blank (only by a script), the site's default judge is used, as by the API.
    judge = forms.CharField(required=False, widget=forms.Select, initial="offline")
    declared_empty = forms.BooleanField(
        required=False,
        label="My tool found nothing in this repo",
        help_text="Needed to submit a file without findings (an empty file is refused).",
    )
    confirm_untitled = forms.BooleanField(
        required=False,
        label="Keep findings without title and description",
        help_text="Such findings are refused unless you confirm that your tool reported them so.",
    )
    method_name, method_description, method_url = method_fields()
    # An empty file goes on to the service, which names it as the API does.
    file = forms.FileField(
        label="Results file (JSON)",
        allow_empty_file=True,
        widget=forms.ClearableFileInput(attrs={"accept": ".json,application/json"}),
    )

    def __init__(
        self, *args: Any, repos: list[tuple[str, str]], user: Any = None, **kwargs: Any
    ) -> None:
        """``repos``: (project id, name) of the repos that results can be submitted for."""
        super().__init__(*args, **kwargs)
        self.fields["repo"].widget = forms.Select(
            choices=[("", "Choose a repo…")]
            + [(pid, pid if name == pid else f"{pid} — {name}") for pid, name in repos]
        )
        self.fields["judge"].widget = forms.Select(choices=judge_choices(user))
        self.fields["file"].help_text = (
            f"A list of findings, or {{project, findings: [...], token_usage, ...}}; at most "
            f"{settings.UPLOAD_MAX_MB} MB."
        )


@login_required
@reads_upload
def submit(request: HttpRequest) -> HttpResponse:
    repos = list(
        visible_repos(request.user).order_by("project_id").values_list("project_id", "name")
    )
    form = ScanSubmissionForm(
        request.POST or None,
        request.FILES or None,
        repos=repos,
        user=request.user,
        initial={"repo": request.GET.get("repo", ""), "scanner": request.GET.get("scanner", "")},
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        repo = visible_repos(request.user).filter(project_id=data["repo"]).first()
        if repo is None:
            form.add_error("repo", f"no repo with project id {data['repo']!r}")
        else:
            answer = upload_answer(
                request,
                form,
                lambda: audit_scan_upload(
                    user=request.user,
                    scanner_name=data["scanner"],
                    repo=repo,
                    upload=data["file"],
                    judge=data["judge"] or None,
                    declared_empty=bool(data.get("declared_empty")),
                    confirm_untitled=bool(data.get("confirm_untitled")),
                    method_name=data.get("method_name", ""),
                    method_description=data.get("method_description", ""),
                    method_url=data.get("method_url", ""),
                ),
                lambda run: (
                    f"Results of {data['scanner'].strip()} for {repo.project_id} received; "
                    f"evaluation run #{run.pk} is queued."
                ),
            )
            if answer is not None:
                return answer
    return render(
        request,
        "audit/submit.html",
        {
            "form": form,
            "repos": repos,
            "max_mb": settings.UPLOAD_MAX_MB,
            "example_repo": repos[0][0] if repos else "PROJECT_ID",
            "windows": audit_submission_windows(request.user),
        },
        status=400 if request.method == "POST" else 200,
    )
