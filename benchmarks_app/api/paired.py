"""``GET /api/boards/compare/``: the paired difference of two entries of one board.

``?board=KIND:ID:PHASE:LABEL&a=ROW&b=ROW`` (the ``board`` and row ``id`` keys every board
row of the API carries). Both rows must be visible to the caller (a hidden phase's rows: staff,
or the caller's own entries); an entry the caller may not see is a 404, as if absent.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchmarks_app.formatting import MAX_ID, whole_number
from benchmarks_app.selectors.paired import (
    BadBoardKey,
    BoardKey,
    EntryNotFound,
    NotComparable,
    paired_compare,
)

BOARD_PATTERN = r"^(audit|probes|checklist):[0-9]+:(-|[0-9]+):.*$"
ROW_ID = {"type": "integer", "minimum": 0, "maximum": MAX_ID}


class PairedDifferenceSerializer(serializers.Serializer):
    board = serializers.CharField()
    a = serializers.IntegerField(help_text="Row id of the first entry.")
    b = serializers.IntegerField(help_text="Row id of the second entry.")
    difference = serializers.FloatField(help_text="a's metric minus b's, on all items.")
    low = serializers.FloatField(help_text="Paired percentile bootstrap interval: low.")
    high = serializers.FloatField(help_text="Paired percentile bootstrap interval: high.")
    level = serializers.FloatField(help_text="The interval's level (0.95).")
    percentile = serializers.FloatField(
        help_text="The percentile level the expanded interval was read at (above level on "
        "few items)."
    )
    resamples = serializers.IntegerField()
    seed = serializers.IntegerField()
    significant = serializers.BooleanField(
        help_text="The two differ, taken alone: the interval excludes 0 and the exact test "
        "(exact_p) is at most 1 - level. Before issue 37 this was the interval alone, now "
        "interval_excludes_zero. The board's marks further correct for the number of pairs "
        "it compares (Holm)."
    )
    interval_excludes_zero = serializers.BooleanField(help_text="The interval excludes 0.")
    p_value = serializers.FloatField(
        help_text="Two-sided bootstrap p-value of no difference, expanded as the interval is."
    )
    exact_p = serializers.FloatField(
        help_text="Exact sign test (exact McNemar on 0/1 items) on the items where the two "
        "differ; on items of several quantities, the smallest p that many items could give."
    )
    items = serializers.IntegerField(help_text="Items both entries were scored on.")
    discordant_items = serializers.IntegerField(help_text="Items on which the two differ.")
    rule_fixed = serializers.CharField(
        help_text="Why the board orders the two by a rule of the benchmark rather than by "
        "their difference (a checklist genuine-only entry, S = 0 by rule); empty otherwise."
    )


def compare_params(params: Any) -> tuple[BoardKey, int, int]:
    """The board key and the two row ids of a compare request; a clear error per field."""
    try:
        key = BoardKey.parse(params.get("board") or "")
    except BadBoardKey as exc:
        raise ValidationError({"board": str(exc).partition(": ")[2]}) from None
    ids = []
    for name in ("a", "b"):
        value = whole_number(params.get(name) or "")
        if value is None:
            raise ValidationError({name: "must be a board row id (an integer)"})
        ids.append(value)
    return key, ids[0], ids[1]


def compare(key: BoardKey, a: int, b: int, user: Any) -> dict[str, Any]:
    try:
        result = paired_compare(board=key, a=a, b=b, user=user)
    except EntryNotFound as exc:
        field, _, message = str(exc).partition(": ")
        raise NotFound({field: message}) from None
    except NotComparable as exc:
        field, _, message = str(exc).partition(": ")
        raise ValidationError({field: message}) from None
    # The resampled differences are the page's picture (2,000 numbers), not the API's.
    return {name: value for name, value in result.items() if name != "draws"}


class PairedCompareView(APIView):
    """The paired difference of two entries of one board and its 95% interval.

    Both entries are resampled on the same items (one shared bootstrap draw), so the
    interval is that of the difference itself, usually much tighter than the two entries'
    own intervals suggest.
    """

    permission_classes = [AllowAny]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "board",
                {"type": "string", "pattern": BOARD_PATTERN},
                required=True,
                description="the board's key (KIND:ID:PHASE:LABEL), as its rows carry it",
            ),
            OpenApiParameter("a", ROW_ID, required=True, description="row id of one entry"),
            OpenApiParameter("b", ROW_ID, required=True, description="row id of the other"),
        ],
        responses=PairedDifferenceSerializer,
    )
    def get(self, request: Request) -> Response:
        key, a, b = compare_params(request.query_params)
        return Response(compare(key, a, b, request.user))
