"""The checklist leaderboard endpoint (``/api/checklist/leaderboard/``) over stored rows.

Routed by :mod:`benchmarks_app.api.checklist`. A page is read in the database (a count, the
page's ids, then its rows), whatever the number of teams.
"""

from __future__ import annotations

import re
from typing import Any

from django.db.models import Model, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from benchmarks_app.api.leaderboard import (
    BoardRowListView,
    ordering_parameter,
    ordering_terms,
    paired_mark_fields,
)
from benchmarks_app.api.pagination import BoardKeysPagination
from benchmarks_app.models import SubmissionKind
from benchmarks_app.models.boards import ChecklistBoardRow
from benchmarks_app.selectors.board_marks import CHECKLIST_SHAPE, attach_marks
from benchmarks_app.selectors.checklist import default_challenge
from benchmarks_app.selectors.checklist_boards import (
    ORDERING_COLUMNS,
    ChecklistBoard,
    ChecklistBoardNotFound,
    board_row_dict,
    checklist_board,
    checklist_board_page_rows,
)

SLUG_RE = re.compile(r"[-a-zA-Z0-9_]+")


class ChecklistLeaderboardRowSerializer(serializers.Serializer):
    """A team's best entry. Scores only: papers and per-question feedback stay private."""

    rank = serializers.IntegerField(
        allow_null=True,
        help_text="Position by S, then C_G, then the earlier submission; null on a hidden "
        "phase's board, where a team sees only its own score.",
    )
    team = serializers.CharField(help_text="Team name.")
    challenge = serializers.CharField(help_text="Challenge slug.")
    phase = serializers.CharField(
        allow_null=True, help_text="Phase slug; null on a challenge without phases."
    )
    submission = serializers.IntegerField(
        help_text="Id of the team's entry: the submission it chose, else its best."
    )
    is_baseline = serializers.BooleanField(help_text="A reference entrant of the organizers.")
    method_name = serializers.CharField(help_text="The method's name, as the team gave it.")
    method_description = serializers.CharField(help_text="A short description of the method.")
    method_url = serializers.CharField(help_text="A link about the method (paper, code).")
    kind = serializers.ChoiceField(
        choices=SubmissionKind.choices, help_text="G: genuine paper only; GAT: a triplet."
    )
    c_g = serializers.FloatField(help_text="Share of correct judgements on the genuine paper.")
    c_a = serializers.FloatField(help_text="The same on the adversarial paper (0 for G only).")
    c_t = serializers.FloatField(
        help_text="The same on the truth-adversarial paper (0 for G only)."
    )
    r = serializers.FloatField(
        help_text="Share of A's answers whose verdict matches A's agreement with T."
    )
    s = serializers.FloatField(help_text="Overall score C_G · C_A · (1 - R) · C_T.")
    s_ci = serializers.SerializerMethodField(
        help_text="95% bootstrap interval [low, high] of S over the questions (see README); "
        "null for scores written before intervals were stored."
    )
    rank_low = serializers.IntegerField(allow_null=True, help_text="Best rank the intervals allow.")
    rank_high = serializers.IntegerField(
        allow_null=True, help_text="Worst rank the intervals allow."
    )
    tied = serializers.BooleanField(help_text="The interval overlaps the entry above's.")
    id, board, paired_rank_low, paired_rank_high, paired_tied = paired_mark_fields()
    created_at = serializers.DateTimeField(help_text="When the submission was made.")

    @extend_schema_field(serializers.ListField(child=serializers.FloatField(), allow_null=True))
    def get_s_ci(self, row: dict[str, Any]) -> list[float] | None:
        if row["ci_low"] is None or row["ci_high"] is None:
            return None
        return [row["ci_low"], row["ci_high"]]


CHECKLIST_ORDERING = ["rank", "team", "s", "c_g", "c_a", "c_t", "r", "created_at"]


class ChecklistLeaderboardView(BoardRowListView):
    """Each team's entry (the submission it chose, else its best), ranked by S, then C_G,
    then the earliest submission.

    Paginated (`page`, `page_size`) in the database: a page costs the same whatever the
    number of teams. `challenge` picks the challenge (the newest open one otherwise:
    challenges are never ranked together), `phase` its phase (the open one otherwise;
    `none` for entries made before the challenge had phases); `ordering` re-orders the rows,
    keeping their rank. A hidden phase's board lists only your own team's row (without its
    rank) until the organizers reveal it; staff see every row.
    """

    serializer_class = ChecklistLeaderboardRowSerializer
    # list() below pages the rows' ids (then reads the page's rows with their team); a page
    # past the middle is read from the board's far end.
    pagination_class = BoardKeysPagination
    ordering_columns = ORDERING_COLUMNS
    shape = CHECKLIST_SHAPE
    board: ChecklistBoard | None = None

    @extend_schema(
        parameters=[
            OpenApiParameter("challenge", str, description="Only this challenge (its slug)."),
            OpenApiParameter(
                "phase",
                str,
                description="The phase's board (its slug; 'none': entries made before the "
                "challenge had phases). Default: the open phase.",
            ),
            ordering_parameter(CHECKLIST_ORDERING, "rank"),
        ]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_board_queryset(self) -> QuerySet[ChecklistBoardRow]:
        params = self.request.query_params
        slug = params.get("challenge") or None
        phase = params.get("phase") or None
        if slug is not None and not SLUG_RE.fullmatch(slug):
            # No challenge has such a slug: an empty board, as for any unknown slug, without
            # sending NUL or other bytes PostgreSQL refuses to the database.
            return ChecklistBoardRow.objects.none()
        if phase is not None and not SLUG_RE.fullmatch(phase):
            raise exceptions.ValidationError({"phase": f"{phase!r} is not a phase slug"})
        try:
            self.board = checklist_board(
                challenge=default_challenge(slug), phase=phase, user=self.request.user
            )
        except ChecklistBoardNotFound as exc:
            field, _, problem = str(exc).partition(": ")
            raise exceptions.ValidationError({field: problem}) from exc
        return self.board.rows()

    def whole_board(self) -> bool:
        board = getattr(self, "board", None)
        return board is not None and board.full

    def order_by(self) -> list[Any]:
        terms = super().order_by()
        # The board's own order sorts by S descending first, so a trailing "-s"
        # adds nothing to it: dropped, the page is read in index order instead of sorted.
        asked = ordering_terms(self.request, list(self.ordering_columns))
        if asked and asked[-1] == ("s", True):
            del terms[len(asked) - 1]
        return terms

    def row(self, obj: Model) -> dict[str, Any]:
        assert isinstance(obj, ChecklistBoardRow)
        return board_row_dict(obj, board=self.board or ChecklistBoard(None, None))

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # The page is chosen on ids alone (an index-only scan in board order; a narrow sort
        # otherwise), then only its rows are read with their team: rows skipped by OFFSET
        # are never joined or materialized, which keeps deep pages of a large board cheap.
        ids = self.get_queryset().values_list("pk", flat=True)
        page = self.paginate_queryset(ids)
        assert page is not None  # a pagination class is always set
        found = checklist_board_page_rows(list(page))
        attach_marks(
            self.shape,
            [found[pk] for pk in page if pk in found],
            first_position=self.first_position(),
            board_size=self.board_size(),
        )
        rows = [self.row(found[pk]) for pk in page if pk in found]
        return self.get_paginated_response(self.get_serializer(rows, many=True).data)
