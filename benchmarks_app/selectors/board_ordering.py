"""The ``ORDER BY`` of a board's stored rows, shared by the API and the site's board pages.

A board orders by a column the caller asks for (a field path or an expression), with the
rows that have no value last in both directions, then by the board's own order (its order
columns, :mod:`benchmarks_app.selectors.board_marks`) and the primary key, so that pages
never overlap or skip a row. Places and ranks are not stored: ordering by rank is the
board's own order, by best rank the span's top descending, by worst rank its bottom.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Expression, F, FloatField, Func, OrderBy, QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.db.models.sql.where import WhereNode


@dataclass(frozen=True)
class Reversed:
    """A column whose ascending order is the column's descending one (best rank ascending is
    the top of the span descending)."""

    column: str


@dataclass(frozen=True)
class Ordered:
    """Several columns in a row, as one ordering: the board's own order for ``rank``.
    ``fixed`` leading columns keep their direction when the order is reversed (the group of
    rows without a rank stays last)."""

    columns: tuple[str, ...]
    fixed: int = 0


Column = str | Expression | Reversed | Ordered


def column_orders(column: Column, *, descending: bool) -> list[OrderBy]:
    """``column`` ascending or descending, missing values last either way."""
    if isinstance(column, Reversed):
        return column_orders(column.column, descending=not descending)
    if isinstance(column, Ordered):
        return [
            *(F(c).asc() for c in column.columns[: column.fixed]),
            *(F(c).desc() if descending else F(c).asc() for c in column.columns[column.fixed :]),
        ]
    expression = F(column) if isinstance(column, str) else column
    return [expression.desc(nulls_last=True) if descending else expression.asc(nulls_last=True)]


def board_order_by(
    terms: Iterable[tuple[str, bool]],
    columns: Mapping[str, Column],
    default: Sequence[Any],
) -> list[Any]:
    """The ``ORDER BY`` of (name, descending) ``terms`` naming ``columns``, then ``default``
    (the board's own order) and ``pk``."""
    ordered = [
        term
        for name, descending in terms
        for term in column_orders(columns[name], descending=descending)
    ]
    return [*ordered, *default, "pk"]


class JsonNumber(Func):
    """A number of the row's metrics document (counts and ratios summed over repos), SQL NULL
    where it is missing or JSON null, so that it sorts last. (Django's key transform turns a
    JSON null into the text 'null' on SQLite, which casts to 0.)"""

    output_field = FloatField()

    def __init__(self, key: str) -> None:
        if not key.isidentifier():
            raise ValueError(f"not a metric name: {key!r}")
        super().__init__(F("metrics"))
        self.key = key

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, Any]:
        sql, params = compiler.compile(self.source_expressions[0])
        return f"JSON_EXTRACT({sql}, '$.{self.key}')", params

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, Any]:
        sql, params = compiler.compile(self.source_expressions[0])
        return f"(({sql}) ->> '{self.key}')::double precision", params

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **extra: Any) -> Any:
        return compiler.compile(Cast(KT(f"metrics__{self.key}"), FloatField()))


def page_slice(
    queryset: QuerySet[Any],
    start: int,
    stop: int,
    *,
    fields: Sequence[str] = (),
    total: int | None = None,
) -> list[Any]:
    """Rows ``start:stop`` of an ordered ``queryset``, read by their keys first; as
    ``values(*fields)`` dicts when ``fields`` are given.

    ``OFFSET`` makes the database step over every row before the page; asking for the keys
    alone lets it step over index entries instead of table rows (and their joins), then
    read only the page's rows, sorted again (the order ends with the key, so it is the
    same). Works for model and ``values()`` querysets alike, but a ``values()`` queryset
    keeps the joins of its related fields in its keys query: give a model queryset and its
    ``fields`` instead. Rows deleted in between are left out.

    ``total``, the queryset's count where the caller has it: a page past the middle is
    read from the far end, in the reversed order (every term flipped, missing values
    included), so that the database steps over the rows after the page instead of the rows
    before it (the last page of a 100,000-row board stepped over 99,900 index entries).
    """
    keys = page_keys(queryset, start, stop, total)
    if not keys:
        return []
    rows = queryset.all()
    # The keys already passed the filters; without them the rows are found by key (SQLite
    # would otherwise walk the board's index, checking each key against the list). The
    # joins stay (the rows' related objects are selected through them).
    rows.query.where = WhereNode()
    rows = rows.filter(pk__in=keys)
    return list(rows.values(*fields) if fields else rows)


def _ends_with_key(queryset: QuerySet[Any]) -> bool:
    """Whether the queryset's explicit order ends with its primary key (then it is total, and
    its reverse is the same rows last first)."""
    terms = queryset.query.order_by
    if not terms or not queryset.query.standard_ordering:
        return False
    last = terms[-1]
    names = {"pk", queryset.model._meta.pk.name, queryset.model._meta.pk.attname}
    if isinstance(last, str):
        return last.lstrip("-") in names
    if isinstance(last, OrderBy) and isinstance(last.expression, F):
        return last.expression.name in names
    return False


def page_keys(queryset: QuerySet[Any], start: int, stop: int, total: int | None) -> list[Any]:
    """The keys of rows ``start:stop`` of an ordered ``queryset``; with its count ``total``,
    a page past the middle is read from the far end (see :func:`page_slice`)."""
    if total is None or start <= total - stop or not _ends_with_key(queryset):
        return list(queryset.values_list("pk", flat=True)[start:stop])
    stop = min(stop, total)
    if start >= stop:
        return []
    # The order ends with the key, so its reverse is exact: rows total-stop:total-start of
    # the reversed order are rows start:stop of this one, last first.
    from_end = queryset.reverse().values_list("pk", flat=True)[total - stop : total - start]
    return list(from_end)[::-1]


class KeysFirstPaginator(Paginator):
    """A page of a queryset read by its rows' keys first (:func:`page_slice`): a deep page
    steps over index entries, not table rows."""

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        return Page(self.rows(bottom, top), number, self)

    def rows(self, bottom: int, top: int) -> Any:
        """What a page holds: rows ``bottom:top`` of the list."""
        if isinstance(self.object_list, QuerySet):
            return page_slice(self.object_list, bottom, top, total=self.count)
        return self.object_list[bottom:top]


class KeysPaginator(KeysFirstPaginator):
    """Pages of the keys of an ordered queryset (a list of ``pk`` per page), read from the far
    end past the middle: for a caller that reads the page's rows itself."""

    def rows(self, bottom: int, top: int) -> Any:
        assert isinstance(self.object_list, QuerySet), "pages the keys of a queryset"
        return page_keys(self.object_list, bottom, top, self.count)
