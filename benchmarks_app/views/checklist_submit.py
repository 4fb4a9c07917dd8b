"""The checklist forms: submitting a team's papers (G alone, or G/A/T) and creating or joining
a team, with the phase and quota the submission lands in."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from benchmarks_app.models import Challenge, PaperKind
from benchmarks_app.selectors.checklist import (
    checklist_quota,
    default_challenge,
    my_team,
    quota_phase,
    user_team,
)
from benchmarks_app.selectors.phases import phase_dates
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    PaperUpload,
    checklist_submission_create,
    read_upload,
    team_create,
    team_join,
)
from benchmarks_app.views.entry_fields import method_fields
from benchmarks_app.views.upload_fields import UploadField

ACCEPT = ".pdf,.tex,.zip"


class SubmissionForm(forms.Form):
    genuine = UploadField(
        label="Genuine paper (G)",
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPT}),
        help_text="PDF, .tex, or .zip of LaTeX sources with a main .tex.",
    )
    adversarial = UploadField(
        label="Adversarial paper (A)",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPT}),
        help_text="Planted errors and deceptive answers. Give A and T together, or neither.",
    )
    truth = UploadField(
        label="Truth-adversarial paper (T)",
        required=False,
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPT}),
        help_text="The same paper as A with truthful answers explaining the planted errors.",
    )
    label = forms.CharField(label="Label (optional)", required=False, max_length=200)
    method_name, method_description, method_url = method_fields()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        has_a, has_t = bool(data.get("adversarial")), bool(data.get("truth"))
        if has_a and not has_t:
            self.add_error(
                "truth", "A needs its T paper: submit G alone, or the full G/A/T triplet."
            )
        if has_t and not has_a:
            self.add_error(
                "adversarial", "T needs its A paper: submit G alone, or the full G/A/T triplet."
            )
        return data


class TeamCreateForm(forms.Form):
    name = forms.CharField(label="Team name", max_length=100)


class TeamJoinForm(forms.Form):
    invite_code = forms.CharField(
        label="Invite code", max_length=32, help_text="Ask a member of the team for it."
    )


def request_challenge(request: HttpRequest) -> Challenge | None:
    """The challenge ``?challenge=`` names, else the default one (every checklist page)."""
    return default_challenge(request.GET.get("challenge") or None)


@login_required
def submit(request: HttpRequest) -> HttpResponse:
    challenge = request_challenge(request)
    team = user_team(user=request.user, challenge=challenge) if challenge else None
    phase = quota_phase(challenge) if challenge else None
    quota = checklist_quota(team=team, phase=phase) if team else None
    form = SubmissionForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and team is not None and form.is_valid():
        try:
            files: dict[str, PaperUpload | None] = {
                PaperKind.GENUINE: read_upload(form.cleaned_data["genuine"], "genuine"),
                PaperKind.ADVERSARIAL: read_upload(
                    form.cleaned_data.get("adversarial"), "adversarial"
                ),
                PaperKind.TRUTH: read_upload(form.cleaned_data.get("truth"), "truth"),
            }
            submission = checklist_submission_create(
                team=team,
                user=request.user,
                files=files,
                label=form.cleaned_data["label"],
                method_name=form.cleaned_data["method_name"],
                method_description=form.cleaned_data["method_description"],
                method_url=form.cleaned_data["method_url"],
            )
        except ChecklistSubmissionError as exc:
            form.add_error(
                exc.field if exc.field in form.fields else None,
                exc.message,
            )
        else:
            messages.success(
                request,
                "Submission received. Check what was extracted, then start the assessment.",
            )
            return redirect("checklist:submission-detail", pk=submission.pk)
    status = 400 if request.method == "POST" else 200
    # A browser empties every file input of a page sent back with an error: name the files
    # that were chosen, so the participant knows exactly what to choose again.
    choose_again = [
        (form.fields[name].label, upload.name)
        for name in form.fields
        if request.method == "POST" and (upload := request.FILES.get(name)) is not None
    ]
    return render(
        request,
        "checklist/submit.html",
        {
            "form": form,
            "choose_again": choose_again,
            "challenge": challenge,
            "team": team,
            "quota": quota,
            "phase": phase,
            "phase_dates": phase_dates(phase) if phase else "",
            "upload_max_mb": settings.UPLOAD_MAX_MB,
            "word_cap": settings.CHECKLIST_BODY_WORD_CAP,
        },
        status=status,
    )


@login_required
def team(request: HttpRequest) -> HttpResponse:
    """Your team in the challenge, or the forms to create one or join one by invite code."""
    challenge = request_challenge(request)
    if challenge is None and request.GET.get("challenge"):
        raise Http404("No such challenge")
    action = request.POST.get("action") if request.method == "POST" else None
    create_form = TeamCreateForm(request.POST if action == "create" else None, prefix="create")
    join_form = TeamJoinForm(request.POST if action == "join" else None, prefix="join")
    form = {"create": create_form, "join": join_form}.get(action or "")
    if form is not None and challenge is not None and form.is_valid():
        try:
            if form is create_form:
                joined = team_create(
                    user=request.user, challenge=challenge, name=form.cleaned_data["name"]
                )
            else:
                joined = team_join(
                    user=request.user, invite_code=form.cleaned_data["invite_code"]
                ).team
        except ChecklistSubmissionError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        else:
            messages.success(request, f"You are now in team {joined.name}.")
            return redirect(f"{reverse('checklist:team')}?challenge={joined.challenge.slug}")
    mine_ = my_team(user=request.user, challenge=challenge) if challenge else None
    return render(
        request,
        "checklist/team.html",
        {
            "challenge": challenge,
            "my_team": mine_,
            "is_owner": mine_ is not None and mine_.owner == request.user.get_username(),
            "create_form": create_form,
            "join_form": join_form,
        },
        status=400 if form is not None else 200,
    )
