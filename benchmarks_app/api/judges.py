"""Judges' agreement with curated verdicts (read-only, public like the boards they judge)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.selectors.judge_agreement import judge_agreement, judges_agreement


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
