"""API of the paper checklist challenge (under /api/checklist/, routes ``api:checklist-...``).

Public: the leaderboard (scores only). Authenticated: submissions of the user's own team,
their extraction, assessments and paper downloads; another team's entries answer 404.
"""

from __future__ import annotations

import mimetypes
import re
from typing import Any

from django.http import FileResponse, Http404
from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.api.checklist_board import ChecklistLeaderboardView
from benchmarks_app.api.pagination import StandardPagination
from benchmarks_app.api.upload_fields import UploadFileField
from benchmarks_app.models import Challenge, PaperKind
from benchmarks_app.selectors.checklist import (
    SubmissionDetail,
    checklist_quota,
    checklist_submission_detail,
    default_challenge,
    my_team,
    team_submissions,
    user_team,
    user_teams,
    visible_paper,
)
from benchmarks_app.services.checklist import (
    ChecklistSubmissionError,
    NotAllowed,
    PaperUpload,
    QuotaExceeded,
    checklist_submission_assess,
    checklist_submission_create,
    read_upload,
    team_create,
    team_join,
)

SLUG_RE = re.compile(r"[-a-zA-Z0-9_]+")


class QuotaExceededError(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "quota_exceeded"
    default_detail = "Submission quota exceeded."


def _refusal(exc: ChecklistSubmissionError) -> exceptions.APIException:
    if isinstance(exc, QuotaExceeded):
        return QuotaExceededError(exc.message)
    if isinstance(exc, NotAllowed):
        return exceptions.PermissionDenied(exc.message, code=exc.code)
    return exceptions.ValidationError({exc.field or "non_field_errors": [exc.message]})


# --- serializers ---------------------------------------------------------------------------


class SubmissionCreateSerializer(serializers.Serializer):
    genuine = UploadFileField(help_text="G paper: .pdf, .tex or .zip of LaTeX sources.")
    adversarial = UploadFileField(required=False, help_text="A paper (with T).")
    truth = UploadFileField(required=False, help_text="T paper (with A).")
    label = serializers.CharField(  # type: ignore[assignment]
        required=False, allow_blank=True, max_length=200
    )
    challenge = serializers.SlugField(required=False, help_text="Challenge slug.")
    assess = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Queue the assessment at once instead of after reviewing the extraction.",
    )
    method_name = serializers.CharField(
        required=False, allow_blank=True, max_length=100, help_text="The method's name."
    )
    method_description = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=500,
        help_text="What the method does, in a few sentences.",
    )
    method_url = serializers.URLField(
        required=False,
        allow_blank=True,
        max_length=500,
        help_text="A link about the method (paper, code).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        has_a, has_t = bool(attrs.get("adversarial")), bool(attrs.get("truth"))
        if has_a and not has_t:
            raise serializers.ValidationError(
                {"truth": "A needs its T paper: submit G alone, or the full G/A/T triplet."}
            )
        if has_t and not has_a:
            raise serializers.ValidationError(
                {"adversarial": "T needs its A paper: submit G alone, or the full G/A/T triplet."}
            )
        return attrs


def _score_json(score: Any) -> dict[str, float] | None:
    if score is None:
        return None
    return {k: getattr(score, k) for k in ("c_g", "c_a", "c_t", "r", "s")}


def _summary_json(request: Request, submission: Any) -> dict[str, Any]:
    scores = list(submission.scores.all())
    return {
        "id": submission.pk,
        "team": submission.team.name,
        "challenge": submission.challenge.slug,
        "kind": submission.kind,
        "status": submission.status,
        "label": submission.label,
        "error": submission.error,
        "created_at": submission.created_at,
        "phase": submission.phase.slug if submission.phase_id else None,
        "board_choice": submission.board_choice,
        "method_name": submission.method_name,
        "method_description": submission.method_description,
        "method_url": submission.method_url,
        "score": _score_json(scores[0] if scores else None),
        "url": request.build_absolute_uri(
            reverse("api:checklist-submission-detail", args=[submission.pk])
        ),
    }


def _detail_json(request: Request, detail: SubmissionDetail) -> dict[str, Any]:
    data = _summary_json(request, detail.submission)
    data["score"] = _score_json(detail.score)
    data["run"] = (
        {
            "id": detail.run.pk,
            "status": detail.run.status,
            "judge": detail.run.judge,
            "progress_done": detail.run.progress_done,
            "progress_total": detail.run.progress_total,
            "failed_items": detail.run.failed_items,
        }
        if detail.run
        else None
    )
    papers = []
    for paper in detail.papers:
        rows = detail.rows.get(paper.kind, [])
        papers.append(
            {
                "id": paper.pk,
                "kind": paper.kind,
                "title": paper.title,
                "source_format": paper.source_format,
                "body_words": paper.body_words,
                "body_truncated": paper.body_truncated,
                "download": request.build_absolute_uri(
                    reverse("api:checklist-paper-download", args=[paper.pk])
                )
                if paper.file
                else None,
                "answers": [
                    {
                        "number": a.question.number,
                        "title": a.question.printed_title,
                        "answer": a.answer,
                        "raw_answer": a.raw_answer,
                        "justification": a.justification,
                        "assessment": {
                            "status": s.status,
                            "correct": s.correct,
                            "feedback": s.feedback,
                        }
                        if s
                        else None,
                    }
                    for a, s in rows
                ],
            }
        )
    data["papers"] = papers
    return data


# --- views ---------------------------------------------------------------------------------


class ChecklistSubmissionListView(APIView):
    """GET: your teams' submissions. POST (multipart): a G paper, or a G/A/T triplet."""

    permission_classes = [IsAuthenticated]
    parser_classes = [MultiPartParser, FormParser]
    reads_participant_files = True  # POST: 503 past PAPER_READERS_MAX (api.schema)

    @extend_schema(
        operation_id="checklist_submissions_list",
        parameters=[
            OpenApiParameter("page", {"type": "integer", "minimum": 1}, description="Page number."),
            OpenApiParameter(
                "page_size",
                {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": StandardPagination.max_page_size,
                    "default": StandardPagination.page_size,
                },
                description="Rows per page.",
            ),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        """The envelope of every list endpoint: ``count``, ``next``, ``previous``, ``results``."""
        submissions = [
            s
            for team in user_teams(request.user)
            for s in team_submissions(user=request.user, team=team)
        ]
        paginator = StandardPagination()
        page: list[Any] | None = paginator.paginate_queryset(
            submissions,  # type: ignore[arg-type]
            request,
            view=self,
        )
        return paginator.get_paginated_response([_summary_json(request, s) for s in page or []])

    @extend_schema(request=SubmissionCreateSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        serializer = SubmissionCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        challenge = default_challenge(data.get("challenge"))
        if challenge is None:
            raise exceptions.ValidationError({"challenge": ["No such challenge."]})
        team = user_team(user=request.user, challenge=challenge)
        if team is None:
            raise exceptions.PermissionDenied(
                f"You are not in a team of the challenge {challenge.name}."
            )
        try:
            files: dict[str, PaperUpload | None] = {
                PaperKind.GENUINE: read_upload(data["genuine"], "genuine"),
                PaperKind.ADVERSARIAL: read_upload(data.get("adversarial"), "adversarial"),
                PaperKind.TRUTH: read_upload(data.get("truth"), "truth"),
            }
            submission = checklist_submission_create(
                team=team,
                user=request.user,
                files=files,
                label=data.get("label", ""),
                assess=data.get("assess", False),
                method_name=data.get("method_name", ""),
                method_description=data.get("method_description", ""),
                method_url=data.get("method_url", ""),
            )
        except ChecklistSubmissionError as exc:
            raise _refusal(exc) from exc
        detail = checklist_submission_detail(user=request.user, pk=submission.pk)
        assert detail is not None
        body = _detail_json(request, detail)
        body["quota"] = checklist_quota(team=team).as_dict()
        return Response(body, status=status.HTTP_201_CREATED)


class ChecklistSubmissionDetailView(APIView):
    """What was extracted, and the per-question assessments (your team and staff only)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int) -> Response:
        detail = checklist_submission_detail(user=request.user, pk=pk)
        if detail is None:
            raise Http404("No such submission")
        return Response(_detail_json(request, detail))


class ChecklistSubmissionAssessView(APIView):
    """Queue the assessment of a submission whose extraction you have checked."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses={202: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        detail = checklist_submission_detail(user=request.user, pk=pk)
        if detail is None:
            raise Http404("No such submission")
        try:
            run = checklist_submission_assess(submission=detail.submission, user=request.user)
        except ChecklistSubmissionError as exc:
            raise _refusal(exc) from exc
        run.refresh_from_db()
        return Response(
            {"run": run.pk, "status": run.status, "judge": run.judge},
            status=status.HTTP_202_ACCEPTED,
        )


class ChecklistQuotaView(APIView):
    """Your team's remaining daily and total submissions."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[OpenApiParameter("challenge", str, description="Challenge slug")],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        challenge: Challenge | None = default_challenge(request.query_params.get("challenge"))
        team = user_team(user=request.user, challenge=challenge) if challenge else None
        if team is None:
            raise Http404("You are not in a team of this challenge")
        return Response({"team": team.name, **checklist_quota(team=team).as_dict()})


class ChecklistPaperDownloadView(APIView):
    """The uploaded file, to its team and staff only."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int) -> FileResponse:
        paper = visible_paper(user=request.user, pk=pk)
        if paper is None or not paper.file:
            raise Http404("No such paper")
        name = paper.original_name or paper.file.name.rsplit("/", 1)[-1]
        response = FileResponse(
            paper.file.open("rb"),
            as_attachment=True,
            filename=name,
            content_type=mimetypes.guess_type(name)[0] or "application/octet-stream",
        )
        response["Cache-Control"] = "private, no-store"
        return response


class TeamCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="Unique within the challenge.")
    challenge = serializers.SlugField(
        required=False, help_text="Challenge slug (the newest open challenge otherwise)."
    )


class TeamJoinSerializer(serializers.Serializer):
    invite_code = serializers.CharField(
        max_length=32, help_text="The code a member of the team gave you."
    )


def _challenge_or_error(slug: str | None) -> Challenge:
    challenge = default_challenge(slug)
    if challenge is None:
        raise exceptions.ValidationError({"challenge": ["No such challenge."]})
    return challenge


class ChecklistTeamCreateView(APIView):
    """Create a team and become its first member (one team per user per challenge)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=TeamCreateSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        serializer = TeamCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        challenge = _challenge_or_error(data.get("challenge"))
        try:
            team_create(user=request.user, challenge=challenge, name=data["name"])
        except ChecklistSubmissionError as exc:
            raise _refusal(exc) from exc
        mine = my_team(user=request.user, challenge=challenge)
        assert mine is not None
        return Response(mine.as_dict(), status=status.HTTP_201_CREATED)


class ChecklistTeamJoinView(APIView):
    """Join a team with the invite code one of its members gave you."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=TeamJoinSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        serializer = TeamJoinSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            membership = team_join(
                user=request.user, invite_code=serializer.validated_data["invite_code"]
            )
        except ChecklistSubmissionError as exc:
            raise _refusal(exc) from exc
        mine = my_team(user=request.user, challenge=membership.team.challenge)
        assert mine is not None
        return Response(mine.as_dict(), status=status.HTTP_201_CREATED)


class ChecklistMyTeamView(APIView):
    """Your team in the challenge: its members and its invite code (members only)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[OpenApiParameter("challenge", str, description="Challenge slug")],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        challenge = default_challenge(request.query_params.get("challenge") or None)
        mine = my_team(user=request.user, challenge=challenge) if challenge else None
        if mine is None:
            raise Http404("You are not in a team of this challenge")
        return Response(mine.as_dict())


urlpatterns = [
    path("leaderboard/", ChecklistLeaderboardView.as_view(), name="checklist-leaderboard"),
    path("submissions/", ChecklistSubmissionListView.as_view(), name="checklist-submission-list"),
    path(
        "submissions/<int:pk>/",
        ChecklistSubmissionDetailView.as_view(),
        name="checklist-submission-detail",
    ),
    path(
        "submissions/<int:pk>/assess/",
        ChecklistSubmissionAssessView.as_view(),
        name="checklist-submission-assess",
    ),
    path("quota/", ChecklistQuotaView.as_view(), name="checklist-quota"),
    path("teams/", ChecklistTeamCreateView.as_view(), name="checklist-team-create"),
    path("teams/join/", ChecklistTeamJoinView.as_view(), name="checklist-team-join"),
    path("teams/mine/", ChecklistMyTeamView.as_view(), name="checklist-team-mine"),
    path(
        "papers/<int:pk>/download/",
        ChecklistPaperDownloadView.as_view(),
        name="checklist-paper-download",
    ),
]
