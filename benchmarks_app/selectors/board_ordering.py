"""The ``ORDER BY`` of a board's stored rows, shared by the API and the site's board pages.

A board orders by a column the caller asks for (a field path or an expression), with the
rows that have no value last in both directions, then by the board's own order
(``position``) and the primary key, so that pages never overlap or skip a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db.models import Expression, F, OrderBy

Column = str | Expression


def column_order(column: Column, *, descending: bool) -> OrderBy:
    """``column`` ascending or descending, missing values last either way."""
    expression = F(column) if isinstance(column, str) else column
    return expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True)


def board_order_by(
    terms: Iterable[tuple[str, bool]],
    columns: Mapping[str, Column],
    default: Sequence[Any] = ("position",),
) -> list[Any]:
    """The ``ORDER BY`` of (name, descending) ``terms`` naming ``columns``, then ``default``
    (the board's own order) and ``pk``."""
    ordered = [column_order(columns[name], descending=descending) for name, descending in terms]
    return [*ordered, *default, "pk"]
