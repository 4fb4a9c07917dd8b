"""API actions on a team's own entries and on the team itself (under /api/checklist/).

Withdraw an entry, choose which scored entry represents the team on the board (or go back
to its best), leave the team; the owner removes members and rotates the invite code. Also
the phases of a challenge. Every write needs authentication and concerns the user's own
team: another team's entry answers 404, as it does for reading.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.models import ChecklistSubmission, Team
from benchmarks_app.selectors.checklist import default_challenge, my_team, user_team
from benchmarks_app.selectors.checklist_boards import challenge_phases, default_phase
from benchmarks_app.selectors.phases import phase_board_public
from benchmarks_app.selectors.visibility import visible_checklist_submissions
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    NotAllowed,
    QuotaExceeded,
    checklist_submission_choose,
    checklist_submission_discard,
    checklist_submission_unchoose,
    team_invite_rotate,
    team_leave,
    team_member_remove,
)

CHALLENGE_PARAM = OpenApiParameter(
    "challenge", str, description="Challenge slug (the newest open challenge otherwise)."
)


def _refusal(exc: ChecklistSubmissionError) -> exceptions.APIException:
    if isinstance(exc, QuotaExceeded | NotAllowed):
        return exceptions.PermissionDenied(exc.message, code=exc.code)
    return exceptions.ValidationError({exc.field or "non_field_errors": [exc.message]})


def _own_submission(request: Request, pk: int) -> ChecklistSubmission:
    """The user's team's submission ``pk``; 404 for any other, staff's view included."""
    user: Any = request.user
    submission = (
        visible_checklist_submissions(user).filter(pk=pk, team__memberships__user=user).first()
    )
    if submission is None:
        raise Http404("No such submission of your team")
    return submission


def _entry_json(submission: ChecklistSubmission) -> dict[str, Any]:
    submission.refresh_from_db(fields=["status", "board_choice", "error"])
    return {
        "id": submission.pk,
        "status": submission.status,
        "board_choice": submission.board_choice,
        "phase": submission.phase.slug if submission.phase_id and submission.phase else None,
        "error": submission.error,
    }


class ChecklistSubmissionWithdrawView(APIView):
    """Withdraw your team's submission that was extracted but not assessed; its files are
    deleted. It frees its slot of the total quota but still counts on its day."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        submission = _own_submission(request, pk)
        try:
            checklist_submission_discard(submission=submission, user=request.user)
        except ChecklistSubmissionError as exc:
            raise _refusal(exc) from exc
        return Response(_entry_json(submission))


class ChecklistSubmissionChoiceView(APIView):
    """POST: make this scored submission your team's entry on its phase's board.
    DELETE: drop the choice; the team's best entry represents it again."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        submission = _own_submission(request, pk)
        try:
            checklist_submission_choose(user=request.user, submission=submission)
        except ChecklistSubmissionError as exc:
            raise _refusal(exc) from exc
        return Response(_entry_json(submission))

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def delete(self, request: Request, pk: int) -> Response:
        submission = _own_submission(request, pk)
        try:
            checklist_submission_unchoose(user=request.user, submission=submission)
        except ChecklistSubmissionError as exc:
            raise _refusal(exc) from exc
        return Response(_entry_json(submission))


def _my_team_or_404(request: Request) -> Team:
    challenge = default_challenge(request.query_params.get("challenge") or None)
    team = user_team(user=request.user, challenge=challenge) if challenge else None
    if team is None:
        raise Http404("You are not in a team of this challenge")
    return team


class ChecklistTeamLeaveView(APIView):
    """Leave your team (its entries stay the team's; an owner hands the team on)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[CHALLENGE_PARAM], request=None, responses={204: None})
    def post(self, request: Request) -> Response:
        team = _my_team_or_404(request)
        try:
            team_leave(user=request.user, team=team)
        except ChecklistSubmissionError as exc:
            raise _refusal(exc) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChecklistTeamMemberView(APIView):
    """Remove a member from your team (the team's owner only)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[CHALLENGE_PARAM], request=None, responses=OpenApiTypes.OBJECT)
    def delete(self, request: Request, username: str) -> Response:
        team = _my_team_or_404(request)
        try:
            team_member_remove(user=request.user, team=team, username=username)
        except ChecklistSubmissionError as exc:
            raise _refusal(exc) from exc
        mine = my_team(user=request.user, challenge=team.challenge)
        assert mine is not None
        return Response(mine.as_dict())


class ChecklistTeamInviteRotateView(APIView):
    """Replace your team's invite code (the team's owner only); the old one stops working."""

    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[CHALLENGE_PARAM], request=None, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request) -> Response:
        team = _my_team_or_404(request)
        try:
            team_invite_rotate(user=request.user, team=team)
        except ChecklistSubmissionError as exc:
            raise _refusal(exc) from exc
        mine = my_team(user=request.user, challenge=team.challenge)
        assert mine is not None
        return Response(mine.as_dict())


class PhaseSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField(allow_null=True)
    is_open = serializers.BooleanField()
    is_default = serializers.BooleanField(help_text="The board shown without ?phase=.")
    board_public = serializers.BooleanField(
        help_text="False while a hidden phase's board waits to be revealed."
    )
    daily_limit = serializers.IntegerField(allow_null=True)
    total_limit = serializers.IntegerField(allow_null=True)


class PhaseListSerializer(serializers.Serializer):
    challenge = serializers.CharField(help_text="The challenge's slug.")
    results = PhaseSerializer(many=True)


class ChecklistPhaseListView(APIView):
    """The phases of a challenge with their dates, quotas and whether their board is public."""

    permission_classes = [AllowAny]

    @extend_schema(parameters=[CHALLENGE_PARAM], responses=PhaseListSerializer)
    def get(self, request: Request) -> Response:
        slug = request.query_params.get("challenge") or None
        challenge = default_challenge(slug)
        if challenge is None:
            raise Http404("No such challenge")
        phases = challenge_phases(challenge)
        shown = default_phase(phases)
        rows = [
            {
                "slug": p.slug,
                "name": p.name,
                "description": p.description,
                "starts_at": p.starts_at,
                "ends_at": p.ends_at,
                "is_open": p.is_open(),
                "is_default": shown is not None and p.pk == shown.pk,
                "board_public": phase_board_public(p),
                "daily_limit": p.daily_limit,
                "total_limit": p.total_limit,
            }
            for p in phases
        ]
        return Response(
            {"challenge": challenge.slug, "results": PhaseSerializer(rows, many=True).data}
        )


urlpatterns = [
    path(
        "submissions/<int:pk>/withdraw/",
        ChecklistSubmissionWithdrawView.as_view(),
        name="checklist-submission-withdraw",
    ),
    path(
        "submissions/<int:pk>/board-choice/",
        ChecklistSubmissionChoiceView.as_view(),
        name="checklist-submission-choice",
    ),
    path("teams/mine/leave/", ChecklistTeamLeaveView.as_view(), name="checklist-team-leave"),
    path(
        "teams/mine/members/<str:username>/",
        ChecklistTeamMemberView.as_view(),
        name="checklist-team-member",
    ),
    path(
        "teams/mine/invite/rotate/",
        ChecklistTeamInviteRotateView.as_view(),
        name="checklist-team-invite-rotate",
    ),
    path("phases/", ChecklistPhaseListView.as_view(), name="checklist-phases"),
]
