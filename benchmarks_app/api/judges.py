"""Judges' agreement with curated verdicts (read-only, public like the boards they judge)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.api.audit_board import BOARD_PARAMETERS, board_params
from benchmarks_app.formatting import MAX_ID
from benchmarks_app.selectors.audit_boards import BoardNotFound, board_is_restricted, resolve_board
from benchmarks_app.selectors.judge_agreement import (
    audit_board_agreement,
    judge_agreement,
    judges_agreement,
    probe_board_agreement,
)
from benchmarks_app.selectors.phases import phase_board_visible
from benchmarks_app.selectors.probe_boards import (
    ProbeReportNotFound,
    probe_board_keys,
    probe_phase,
    probe_suite_check,
)


class JudgeAgreementView(APIView):
    """Each judge's agreement with the curated verdicts, per benchmark: the number of curated
    items it judged (``n``), accuracy and Cohen's kappa with 95% bootstrap intervals, the
    confusion matrix (``confusion[curated][judge]``), items it judged without a verdict
    (``failed``) and the warnings boards show. ``judge``: one judge record's name or judge key
    (``offline``, ``openai:MODEL``, ``rules``...); without it, every judge."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[OpenApiParameter("judge", str, description="a judge record or judge key")],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        judge = (request.query_params.get("judge") or "").strip()
        figures = judge_agreement(judge) if judge else judges_agreement()
        return Response({"judge": judge or None, "results": figures})


# The board's parameters; a release number is at most the largest id (a larger one is a 400).
AGREEMENT_BOARD_PARAMETERS = [
    OpenApiParameter(
        "release",
        {"type": "integer", "minimum": 0, "maximum": MAX_ID},
        description="release number (default: the dataset's official release)",
    )
    if p.name == "release"
    else p
    for p in BOARD_PARAMETERS
]


class AuditBoardAgreementView(APIView):
    """The audit board's judge against curated verdicts, on the items of the board's runs (the
    board is chosen as in ``/api/audit/leaderboard/``). ``judge_agreement`` is null while the
    board is a hidden phase's; ``warnings`` are the notes the board page shows."""

    permission_classes = [AllowAny]

    @extend_schema(parameters=AGREEMENT_BOARD_PARAMETERS, responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            board = resolve_board(**board_params(request))
        except BoardNotFound as exc:
            field, _, message = str(exc).partition(": ")
            raise NotFound({field: message}) from None
        if board is None:
            return Response({"board": None, "judge_agreement": None})
        figures = (
            None
            if board_is_restricted(board, request.user)
            else audit_board_agreement(
                release_id=board.release.pk,
                judge=board.judge,
                phase_id=board.phase.pk if board.phase else None,
            )
        )
        identity = {
            "dataset": board.dataset.slug,
            "release": board.release.number,
            "judge": board.judge,
            "phase": board.phase.slug if board.phase else None,
        }
        return Response({"board": identity, "judge_agreement": figures})


class ProbeBoardAgreementView(APIView):
    """Each board of a probe suite (one per suite version, or of one phase): its refusal
    signal against curated verdicts (XSTest human labels and maintainers' verdicts), on the
    items of the board's runs. A hidden phase's boards give null until revealed."""

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "suite",
                {"type": "string", "minLength": 1},
                required=True,
                description="the suite (exact name)",
            ),
            OpenApiParameter("version", str, description="one suite version (default: all)"),
            OpenApiParameter("phase", str, description="the boards of this phase (its slug)"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        params = request.query_params
        suite = params.get("suite") or ""
        if not suite:
            raise ValidationError({"suite": "required: the suite's name"})
        phase = None
        try:
            probe_suite_check(suite)
            if params.get("phase"):
                phase = probe_phase(suite_name=suite, slug=params["phase"])
        except ProbeReportNotFound as exc:
            field, _, message = str(exc).partition(": ")
            raise NotFound({field: message}) from None
        boards = probe_board_keys(suite=suite, phase=phase, version=params.get("version"))
        visible = phase is None or phase_board_visible(phase, request.user)
        results = [
            {
                "suite": suite,
                "suite_version": version,
                "phase": phase.slug if phase else None,
                "judge_agreement": probe_board_agreement(
                    suite_id=suite_id,
                    suite_version=version,
                    phase_id=phase.pk if phase else None,
                )
                if visible
                else None,
            }
            for suite_id, version in sorted(boards, key=lambda b: b[1])
        ]
        return Response({"results": results})
