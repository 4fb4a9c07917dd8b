"""The bases of the three leaderboard endpoints (``/api/<benchmark>/leaderboard/``).

:class:`BoardRowListView` pages a board's stored rows (one row per entrant, written when a
run ends) in the database: ``?ordering=`` becomes ``ORDER BY`` and a page is one ``LIMIT``
query plus a count, its rows' places and ranks counted on the board's indexes, whatever the
number of entrants. :class:`LeaderboardListView`
is the older base that orders and pages a selector's list in Python (kept for boards that
have no stored rows yet). Both answer with the envelope of every other list endpoint::

    {"count": 23, "next": "...?page=2", "previous": null, "results": [{"rank": 1, ...}]}

``?ordering=field`` (``-field`` for descending, several separated by commas) re-orders the
rows with missing values last in both directions, as the site's sortable tables do; each
row keeps the rank its selector gave it. An unknown field is a 400 naming it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.db.models import Expression, Model, QuerySet
from drf_spectacular.utils import OpenApiParameter
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from benchmarks_app.api.pagination import BoardPagination, StandardPagination
from benchmarks_app.selectors.board_marks import BoardShape, attach_marks, own_order
from benchmarks_app.selectors.board_ordering import board_order_by


def _key(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        return value.casefold()
    return value


def ordering_terms(
    request: Request, fields: Sequence[str], aliases: Mapping[str, str] | None = None
) -> list[tuple[str, bool]]:
    """``?ordering=`` as (field, descending) pairs, aliases resolved; ``[]`` when absent.

    Raises :class:`ValidationError` on ``ordering`` when it is given twice or names a field
    not in ``fields`` (the same 400 as :func:`order_rows`).
    """
    orderings = request.query_params.getlist("ordering")
    if len(orderings) > 1:
        raise ValidationError({"ordering": "give it once (fields separated by commas)"})
    if not orderings or not orderings[0]:
        return []
    aliases = aliases or {}
    terms = []
    for raw in orderings[0].split(","):
        name = raw.removeprefix("-")
        name = aliases.get(name, name)
        if name not in fields:
            raise ValidationError(
                {
                    "ordering": f"unknown field {raw.removeprefix('-')!r}; order by one of: "
                    f"{', '.join(fields)} (prefix '-' for descending)"
                }
            )
        terms.append((name, raw.startswith("-")))
    return terms


def order_rows(
    rows: list[dict[str, Any]], ordering: str | None, fields: Sequence[str]
) -> list[dict[str, Any]]:
    """``rows`` ordered as ``?ordering=`` asks (nulls last); unchanged when it is empty.

    Raises :class:`ValidationError` on ``ordering`` for a field not in ``fields``.
    """
    terms = (ordering or "").split(",") if ordering else []
    unknown = [t for t in terms if t.removeprefix("-") not in fields]
    if unknown:
        raise ValidationError(
            {
                "ordering": f"unknown field {unknown[0].removeprefix('-')!r}; order by one of: "
                f"{', '.join(fields)} (prefix '-' for descending)"
            }
        )
    ordered = list(rows)
    # Stable sorts from the last term to the first: the first term decides, later ones break
    # its ties, and the selector's own order breaks the rest.
    for term in reversed(terms):
        field, descending = term.lstrip("-"), term.startswith("-")
        present = [r for r in ordered if r.get(field) is not None]
        missing = [r for r in ordered if r.get(field) is None]
        present.sort(key=lambda r: _key(r[field]), reverse=descending)
        ordered = present + missing
    return ordered


def ordering_parameter(fields: Sequence[str], default: str) -> OpenApiParameter:
    """The documented ``ordering`` parameter of a leaderboard endpoint."""
    names = "|".join(re.escape(f) for f in fields)
    return OpenApiParameter(
        "ordering",
        {"type": "string", "pattern": rf"^(-?(?:{names})(?:,-?(?:{names}))*)?$"},
        description=(
            f"Order by a field, '-field' for descending; several separated by commas. "
            f"Rows without a value come last either way. Default: {default}. "
            f"Fields: {', '.join(fields)}."
        ),
    )


class LeaderboardListView(generics.ListAPIView):
    """Rows of a benchmark's leaderboard selector, ordered and paginated.

    Subclasses set ``serializer_class`` and ``ordering_fields`` and return the selector's
    rows (best first, each with its ``rank``) from :meth:`get_rows`.
    """

    permission_classes = [AllowAny]
    pagination_class = StandardPagination
    # The rows are a list, not a queryset: ordering is done by order_rows, filters by the
    # selector's own arguments.
    filter_backends: list[Any] = []
    ordering_fields: Sequence[str] = ()

    def get_rows(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def ordering_alias(self, field: str) -> str:
        """The row key an ordering field stands for (older names of renamed fields)."""
        return field

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        orderings = request.query_params.getlist("ordering")
        if len(orderings) > 1:
            raise ValidationError({"ordering": "give it once (fields separated by commas)"})
        ordering = orderings[0] if orderings else None
        if ordering:
            ordering = ",".join(
                ("-" if t.startswith("-") else "") + self.ordering_alias(t.removeprefix("-"))
                for t in ordering.split(",")
            )
        rows = order_rows(self.get_rows(), ordering, self.ordering_fields)
        # The paginator slices any sequence; the stubs only know querysets.
        page: list[dict[str, Any]] | None = self.paginate_queryset(rows)  # type: ignore[arg-type]
        assert page is not None  # a pagination class is always set
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class BoardRowListView(generics.ListAPIView):
    """A board's stored rows (one per entrant), ordered and paged by the database.

    Subclasses give:

    * :meth:`get_board_queryset`: the rows of the board asked for (filtered to what the
      user may see), with whatever ``select_related`` :meth:`row` needs;
    * ``ordering_columns``: API ordering name → column (a field path or an expression);
    * ``shape``: the board's model, order and marks (places and ranks are counted for the
      page's rows, :mod:`benchmarks_app.selectors.board_marks`);
    * :meth:`row`: a stored row, its marks set → the dict the ``serializer_class`` renders.

    ``?ordering=`` puts rows without a value last in both directions, then keeps the board's
    own order for ties, so pages never overlap. Unknown fields are a 400 naming the field.
    """

    permission_classes = [AllowAny]
    pagination_class: type[StandardPagination] = BoardPagination
    filter_backends: list[Any] = []
    ordering_columns: Mapping[str, str | Expression] = {}
    ordering_aliases: Mapping[str, str] = {}
    shape: BoardShape

    @property
    def default_ordering(self) -> Sequence[Any]:
        """The board's own order (best first)."""
        return own_order(self.shape)

    def get_board_queryset(self) -> QuerySet[Any]:
        raise NotImplementedError

    def row(self, obj: Model) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def ordering_fields(self) -> list[str]:
        return [*self.ordering_columns, *self.ordering_aliases]

    def order_by(self) -> list[Any]:
        """The ``ORDER BY`` of the request: its ``?ordering=``, then the board's order."""
        terms = ordering_terms(self.request, list(self.ordering_columns), self.ordering_aliases)
        return board_order_by(terms, self.ordering_columns, self.default_ordering)

    def get_queryset(self) -> QuerySet[Any]:
        return self.get_board_queryset().order_by(*self.order_by())

    def whole_board(self) -> bool:
        """Whether :meth:`get_board_queryset` gave one board's rows, all of them (set by it);
        a page in the board's own order then takes its places from its offset instead of
        counting them (:func:`~benchmarks_app.selectors.board_marks.attach_marks`)."""
        return False

    def first_position(self) -> int | None:
        """The place of the current page's first row where it follows from the page's
        offset (see :meth:`whole_board`): no ``?ordering=``, one whole board."""
        if ordering_terms(self.request, list(self.ordering_columns), self.ordering_aliases):
            return None
        page = getattr(self.paginator, "page", None)
        if not self.whole_board() or page is None:
            return None
        return int(page.start_index())

    def board_size(self) -> int | None:
        """The number of the board's rows where :meth:`first_position` holds: the pager
        counted the whole board (a deep page then counts its marks from the board's end)."""
        if self.first_position() is None:
            return None
        return int(self.paginator.page.paginator.count)  # type: ignore[union-attr]

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        assert page is not None  # a pagination class is always set
        marked = attach_marks(
            self.shape,
            list(page),
            first_position=self.first_position(),
            board_size=self.board_size(),
        )
        rows = [self.row(obj) for obj in marked]
        return self.get_paginated_response(self.get_serializer(rows, many=True).data)


def paired_mark_fields() -> tuple[
    serializers.IntegerField,
    serializers.CharField,
    serializers.IntegerField,
    serializers.IntegerField,
    serializers.BooleanField,
]:
    """A board row's ``id``, ``board`` and paired marks, the same on the three leaderboards;
    new field instances on each call, declared where the row serializer unpacks them."""
    return (
        serializers.IntegerField(
            help_text="The row's id: what /api/boards/compare/ takes as a or b."
        ),
        serializers.CharField(
            help_text="The board's key (KIND:ID:PHASE:LABEL) for /api/boards/compare/."
        ),
        serializers.IntegerField(
            allow_null=True,
            help_text="Best rank by the paired rule: 1 + the entries significantly better by "
            "their paired difference. Null until computed (a task after each run's end) or "
            "beyond the rows it tests: use rank_low then.",
        ),
        serializers.IntegerField(
            allow_null=True,
            help_text="Worst rank by the paired rule: the ranked entries minus those "
            "significantly worse. Null as paired_rank_low.",
        ),
        serializers.BooleanField(
            allow_null=True,
            help_text="Tied with the row above by the paired rule: their paired difference's "
            "95% interval contains 0. Null as paired_rank_low.",
        ),
    )
