"""The audit leaderboard endpoint: one board's stored rows, ordered and paged in the database.

A board is a dataset release and a judge (default: the official ones), optionally one phase
of the release. Each page is one query on ``AuditBoardRow`` (and a count), whatever the
number of scanners; ``?ordering=`` orders by the stored columns and metrics.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from benchmarks_app.api.leaderboard import (
    BoardRowListView,
    ordering_parameter,
    paired_mark_fields,
)
from benchmarks_app.formatting import whole_number
from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.selectors.audit_boards import (
    AUDIT_ORDERING_COLUMNS,
    PUBLIC_ROW_KEYS,
    BoardNotFound,
    board_is_restricted,
    board_row,
    board_row_queryset,
    public_row,
    resolve_board,
)
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE


class AuditLeaderboardRowSerializer(serializers.Serializer):
    """One scanner on one board (a dataset release and a judge); counts summed over repos."""

    scanner = serializers.CharField(help_text="Scanner name.")
    rank = serializers.IntegerField(
        allow_null=True,
        help_text="By F1 with partial, then F1; equal numbers share a rank. Null: incomplete.",
    )
    rank_low = serializers.IntegerField(
        allow_null=True, help_text="Best rank the 95% intervals allow."
    )
    rank_high = serializers.IntegerField(
        allow_null=True, help_text="Worst rank the 95% intervals allow."
    )
    complete = serializers.BooleanField(help_text="Evaluated on every repo of the release.")
    repos_evaluated = serializers.IntegerField()
    repos_total = serializers.IntegerField(help_text="Repos in the release.")
    tp = serializers.IntegerField(help_text="Exact matches (true positives).")
    partial = serializers.IntegerField(  # type: ignore[assignment]
        help_text="Partial matches: right contract, function and core issue."
    )
    fp = serializers.IntegerField(help_text="Reported findings matching nothing.")
    fn = serializers.IntegerField(help_text="Verified findings not found.")
    precision = serializers.FloatField(allow_null=True, help_text="TP / reported, in [0, 1].")
    recall = serializers.FloatField(allow_null=True, help_text="TP / verified, in [0, 1].")
    f1 = serializers.FloatField(allow_null=True)
    f1_with_partial = serializers.FloatField(allow_null=True, help_text="The ranking metric.")
    f1_with_partial_ci = serializers.ListField(
        child=serializers.FloatField(),
        min_length=2,
        max_length=2,
        allow_null=True,
        help_text="95% percentile bootstrap interval [low, high] over truth findings.",
    )
    is_baseline = serializers.BooleanField(help_text="A reference scanner of the maintainers.")
    tied = serializers.BooleanField(
        help_text="Statistically tied: the interval overlaps the interval of the row above."
    )
    id, board, paired_rank_low, paired_rank_high, paired_tied = paired_mark_fields()
    phase = serializers.CharField(
        allow_null=True, help_text="The phase (slug) of this board; null: the whole release."
    )
    run_id = serializers.IntegerField(
        allow_null=True,
        help_text="The run standing for the scanner on this board (the latest when several "
        "runs cover its repos).",
    )
    method_name = serializers.CharField(help_text="The entry's method, as its owner named it.")
    method_description = serializers.CharField()
    method_url = serializers.CharField(help_text="A link about the method (blank: none).")


AUDIT_ORDERING = [k for k in PUBLIC_ROW_KEYS if k != "f1_with_partial_ci"]
# Older clients order by ``repos``: the repos evaluated.
ORDERING_ALIASES = {"repos": "repos_evaluated"}


ROW_EXTRA_KEYS = (
    "is_baseline",
    "method_name",
    "method_description",
    "method_url",
    "tied",
    "phase",
    "run_id",
    "id",
    "board",
    "paired_rank_low",
    "paired_rank_high",
    "paired_tied",
)


def board_params(request: Request, *, phase: bool = True) -> dict[str, str | None]:
    keys = ("dataset", "release", "judge", "phase") if phase else ("dataset", "release", "judge")
    params = {k: request.query_params.get(k) or None for k in keys}
    release = params["release"]
    if release is not None and whole_number(release) is None:
        raise ValidationError({"release": "must be a release number (an integer)"})
    return params


RELEASE_PARAMETERS = [
    OpenApiParameter("dataset", str, description="dataset slug (default: the site's first)"),
    OpenApiParameter(
        "release",
        {"type": "integer", "minimum": 0},
        description="release number (default: the dataset's official release)",
    ),
    OpenApiParameter(
        "judge", str, description="offline, openai:MODEL or replay:DIR (default: official)"
    ),
]
BOARD_PARAMETERS = [
    *RELEASE_PARAMETERS,
    OpenApiParameter(
        "phase",
        str,
        description="phase slug: the board of that phase's runs (default: the whole release). "
        "A hidden phase's board shows participants only their own scanners until revealed.",
    ),
]


class LeaderboardView(BoardRowListView):
    """One audit board: a dataset release and a judge (default: the official ones).

    The rows of ``manage.py audit_leaderboard --format json``: ranked scanners (evaluated on
    every repo of the release) first, then incomplete ones, unranked. Paginated (`page`,
    `page_size`); `ordering` re-orders the rows, keeping their rank. Each page is read from
    the stored board rows with one query (and a count), whatever the number of scanners.
    """

    serializer_class = AuditLeaderboardRowSerializer
    shape = AUDIT_SHAPE
    ordering_columns = AUDIT_ORDERING_COLUMNS
    ordering_aliases = ORDERING_ALIASES

    @extend_schema(
        parameters=[*BOARD_PARAMETERS, ordering_parameter([*AUDIT_ORDERING, "repos"], "rank")]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_board_queryset(self) -> QuerySet[Any]:
        try:
            board = resolve_board(**board_params(self.request))
        except BoardNotFound as exc:
            field, _, message = str(exc).partition(": ")
            raise NotFound({field: message}) from None
        if board is None:
            return AuditBoardRow.objects.none()
        self._whole = not board_is_restricted(board, self.request.user)
        return board_row_queryset(board, user=self.request.user)

    def whole_board(self) -> bool:
        return getattr(self, "_whole", False)

    def row(self, obj: Any) -> dict[str, Any]:
        row = board_row(obj)
        return {**public_row(row), **{k: row[k] for k in ROW_EXTRA_KEYS}}
