"""What the board marks are counted over: each board model's shape (the columns that pick a
board, its order, its shared-rank prefix and stored tie), the light columns a row is ranked by,
and reading them (:mod:`~benchmarks_app.selectors.board_marks` counts the marks)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Model

from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.models.boards import ChecklistBoardRow, ProbeBoardRow
from benchmarks_app.models.common import phase_key_of


@dataclass(frozen=True)
class BoardShape:
    """How a board model orders and ranks its rows.

    ``board`` names the columns that pick one board out of the table; ``order`` the columns
    of its order (ascending, the last unique); ``shared`` how many leading ``order`` columns
    rows must share to share a rank (0: the rank is the place); ``value`` the column compared
    against rows whose value is exact (None: the board has none), on boards where every row
    is ranked; ``tied`` the stored tie column.
    """

    model: type[Model]
    board: tuple[str, ...]
    order: tuple[str, ...]
    tied: str
    shared: int = 0
    value: str | None = None


@dataclass(frozen=True)
class Marks:
    position: int
    rank: int | None
    rank_low: int | None
    rank_high: int | None


@dataclass(frozen=True)
class LightRow:
    pk: int
    key: tuple[Any, ...]
    low: float | None
    high: float | None
    exact: bool
    value: float | None

    @property
    def ranked(self) -> bool:
        return self.low is not None or self.exact


def board_filter(shape: BoardShape, board: Mapping[str, Any]) -> dict[str, Any]:
    """The ORM filter of one board: ``board`` holds a value per :attr:`BoardShape.board`.
    The phase is matched by its ``phase_key`` (never NULL), which the indexes lead with."""
    return {key_name(name): key_value(name, board[name]) for name in shape.board}


def key_name(name: str) -> str:
    return "phase_key" if name == "phase" else name


def key_value(name: str, value: Any) -> Any:
    return phase_key_of(value) if name == "phase" else getattr(value, "pk", value)


def board_of(shape: BoardShape, row: Any) -> dict[str, Any]:
    """The board a stored row (model instance or ``values()`` dict) is on."""
    return {name: row_value(shape, row, name) for name in shape.board}


def row_value(shape: BoardShape, row: Any, name: str) -> Any:
    attribute = field_attribute(shape, name)
    if isinstance(row, dict):
        return row[attribute] if attribute in row else row[name]
    return getattr(row, attribute)


def row_pk(row: Any) -> int:
    if isinstance(row, dict):
        return int(row["pk"] if "pk" in row else row["id"])
    return int(row.pk)


def field_attribute(shape: BoardShape, name: str) -> str:
    if name in ("id", "pk"):
        return "pk"
    return str(shape.model._meta.get_field(name).attname)  # type: ignore[union-attr]


def key_of(shape: BoardShape, row: Any) -> tuple[Any, ...]:
    """A stored row's order key (model instance)."""
    return tuple(getattr(row, field_attribute(shape, name)) for name in shape.order)


def own_order(shape: BoardShape) -> list[str]:
    """The ``ORDER BY`` of the board's own order, led by the columns that pick the board."""
    # Foreign keys by their column: ordering by the relation would sort by the related
    # model's own ordering. The board's columns lead although one board's rows share them,
    # as its order index does: a query over several boards reads it in order too.
    return [field_attribute(shape, key_name(name)) for name in (*shape.board, *shape.order)]


def light_columns(shape: BoardShape) -> list[str]:
    return [*shape.order, "span_low", "span_high", "exact", *([shape.value] if shape.value else [])]


def light_fields(shape: BoardShape) -> list[str]:
    """The fields to read with ``values()`` rows so that marking them reads nothing again."""
    return [field_attribute(shape, name) for name in light_columns(shape) if name != "id"]


def column_sql(shape: BoardShape, name: str) -> str:
    # Looked up for every column of every count of a page (600 a page): once per name.
    return _quoted_column(shape.model, name, connection.vendor)


@functools.lru_cache(maxsize=256)
def _quoted_column(model: type[Model], name: str, vendor: str) -> str:
    field = model._meta.pk if name in ("id", "pk") else model._meta.get_field(name)
    return connection.ops.quote_name(str(field.column))  # type: ignore[union-attr]


def where_board(shape: BoardShape, board: Mapping[str, Any]) -> tuple[str, list[Any]]:
    names = [key_name(name) for name in shape.board]
    parts = [f"{column_sql(shape, name)} = %s" for name in names]
    return " AND ".join(parts), [key_value(name, board[name]) for name in shape.board]


def compare_sql(columns: Sequence[str], op: str, threshold: Sequence[Any]) -> tuple[str, list[Any]]:
    if len(columns) == 1:
        return f"{columns[0]} {op} %s", [threshold[0]]
    marks = ", ".join(["%s"] * len(columns))
    return f"({', '.join(columns)}) {op} ({marks})", list(threshold)


def rows_from(shape: BoardShape, values: Iterable[Sequence[Any]]) -> list[LightRow]:
    n = len(shape.order)
    out = []
    for v in values:
        value = v[n + 4] if shape.value else None
        out.append(
            LightRow(
                pk=int(v[0]),
                key=tuple(v[1 : n + 1]),
                low=v[n + 1],
                high=v[n + 2],
                exact=bool(v[n + 3]),
                value=None if value is None else float(value),
            )
        )
    return out


def light_rows(
    shape: BoardShape, board: Mapping[str, Any], pks: Iterable[int] | None
) -> list[LightRow]:
    qs = shape.model._default_manager.filter(**board_filter(shape, board)).order_by()
    if pks is not None:
        qs = qs.filter(pk__in=list(pks))
    columns = ["pk", *light_columns(shape)]
    key_columns = tuple(c if c != "id" else "pk" for c in columns)
    sql, params = qs.values_list(*key_columns).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return rows_from(shape, cursor.fetchall())


AUDIT_SHAPE = BoardShape(
    model=AuditBoardRow,
    board=("release", "judge", "phase"),
    order=("sort_group", "sort_repos", "sort_a", "sort_b", "sort_name", "id"),
    tied="tied_with_above",
    # Rows with the same numbers share a rank (1, 1, 3).
    shared=4,
)
PROBE_SHAPE = BoardShape(
    model=ProbeBoardRow,
    board=("suite", "suite_version", "phase"),
    order=("sort_group", "sort_a", "sort_b", "sort_name", "id"),
    tied="tied",
)
CHECKLIST_SHAPE = BoardShape(
    model=ChecklistBoardRow,
    board=("challenge", "phase"),
    order=("sort_a", "sort_b", "sort_time", "submission", "id"),
    tied="tied",
    value="s",
)
