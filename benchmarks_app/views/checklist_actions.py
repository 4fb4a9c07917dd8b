"""Buttons of the checklist pages: choose the team's board entry, leave or manage the team.

Each is a POST that calls one service and goes back to the page it came from with a message;
routed by :mod:`benchmarks_app.views.checklist` (namespace ``checklist``).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from benchmarks_app.models import Challenge, Team
from benchmarks_app.selectors.checklist import checklist_submission_detail, user_team
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    checklist_submission_choose,
    checklist_submission_unchoose,
    team_invite_rotate,
    team_leave,
    team_member_remove,
)


def _back(request: HttpRequest, default: str) -> HttpResponse:
    # Only paths of this site: a crafted "next" must not send the user elsewhere.
    target = request.POST.get("next", "")
    if target.startswith("/") and not target.startswith("//"):
        return redirect(target)
    return redirect(default)


@login_required
@require_POST
def submission_choose(request: HttpRequest, pk: int) -> HttpResponse:
    """Make (or, with ``action=unchoose``, stop making) this entry the team's board entry."""
    detail = checklist_submission_detail(user=request.user, pk=pk)
    if detail is None:
        raise Http404("No such submission")
    unchoose = request.POST.get("action") == "unchoose"
    try:
        if unchoose:
            checklist_submission_unchoose(user=request.user, submission=detail.submission)
        else:
            checklist_submission_choose(user=request.user, submission=detail.submission)
    except ChecklistSubmissionError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            "Your team's best entry represents it on the board again."
            if unchoose
            else f"Entry #{pk} now represents your team on the board.",
        )
    return _back(request, reverse("checklist:submission-detail", args=[pk]))


def _team_or_404(request: HttpRequest) -> Team:
    challenge = Challenge.objects.filter(slug=request.POST.get("challenge", "")).first()
    team = user_team(user=request.user, challenge=challenge) if challenge else None
    if team is None:
        raise Http404("You are not in a team of this challenge")
    return team


def _team_page(team: Team) -> HttpResponse:
    return redirect(f"{reverse('checklist:team')}?challenge={team.challenge.slug}")


@login_required
@require_POST
def team_leave_view(request: HttpRequest) -> HttpResponse:
    team = _team_or_404(request)
    try:
        team_leave(user=request.user, team=team)
    except ChecklistSubmissionError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"You left team {team.name}.")
    return _team_page(team)


@login_required
@require_POST
def team_member_remove_view(request: HttpRequest) -> HttpResponse:
    team = _team_or_404(request)
    username = request.POST.get("username", "")
    try:
        team_member_remove(user=request.user, team=team, username=username)
    except ChecklistSubmissionError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{username} is no longer in team {team.name}.")
    return _team_page(team)


@login_required
@require_POST
def team_invite_rotate_view(request: HttpRequest) -> HttpResponse:
    team = _team_or_404(request)
    try:
        team_invite_rotate(user=request.user, team=team)
    except ChecklistSubmissionError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "New invite code made; the old one no longer works.")
    return _team_page(team)
