"""Sortable tables with CSV and JSON download, shared by every leaderboard page.

A view builds a :class:`SortableTable` from the rows its selector returned and either
returns the download (``?format=csv`` / ``?format=json``) or renders the table with
``{% include "leaderboards/_table.html" with table=table %}``::

    COLUMNS = [
        Column("scanner", "Scanner", link=lambda row: reverse("audit:scanner", args=[row.id])),
        Column("recall", "Recall", kind="pct"),
        Column("f1", "F1", kind="float", digits=3),
    ]

    def leaderboard(request):
        table = SortableTable(request, audit_leaderboard(), COLUMNS,
                              default_sort="-f1", filename="audit-leaderboard")
        if (download := table.download()) is not None:
            return download
        return render(request, "audit/leaderboard.html", {"table": table})

Sorting happens in Python on the rows the selector returned (leaderboards are small), with
missing values last in both directions. Rank is the position in the selector's own order,
so re-sorting a column does not renumber the entries. Downloads carry raw values, not the
formatted ones, in the order currently shown. Cells are rounded (never cut off) by
:func:`benchmarks_app.formatting.format_fixed`, the rule of the command-line output.
"""

from __future__ import annotations

import csv
import functools
import html
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal, NamedTuple
from urllib.parse import quote, urlencode

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.urls import get_script_prefix, reverse
from django.utils.formats import localize
from django.utils.html import conditional_escape
from django.utils.http import RFC3986_SUBDELIMS
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import slugify

from benchmarks_app.formatting import format_fixed, format_percent

Kind = Literal["text", "int", "float", "pct", "datetime"]
NUMERIC_KINDS = {"int", "float", "pct"}
MISSING = "—"


def resolve(row: Any, key: str) -> Any:
    """``row[key]`` or ``row.key``, following dots (``"scanner.name"``); ``None`` if absent."""
    if type(row) is dict and "." not in key:
        # Every cell of a board page is looked up here: the common case first.
        value = row.get(key)
        return value() if callable(value) and not isinstance(value, type) else value
    value = row
    for part in key.split("."):
        if value is None:
            return None
        value = value.get(part) if isinstance(value, Mapping) else getattr(value, part, None)
        if callable(value) and not isinstance(value, type):
            value = value()
    return value


@dataclass(frozen=True)
class Column:
    """One column: where its value comes from and how it is shown.

    ``kind`` picks alignment and formatting: numbers are right-aligned; ``pct`` shows a
    fraction in [0, 1] as a percentage. ``value`` overrides ``key`` for computed cells;
    ``link`` turns the cell into a link (return ``None`` for no link); ``title`` gives a
    header tooltip explaining the metric. ``detail`` columns are hidden until the reader
    asks for all columns (the table's "All columns" toggle); downloads always carry them.
    ``page=False``: a column only downloads carry (a reading the page shows merged into
    another column, kept so that downloads keep their keys).
    """

    key: str
    label: str
    kind: Kind = "text"
    digits: int = 3
    sortable: bool = True
    value: Callable[[Any], Any] | None = None
    link: Callable[[Any], str | None] | None = None
    title: str = ""
    export: bool = True
    detail: bool = False
    page: bool = True

    @property
    def numeric(self) -> bool:
        return self.kind in NUMERIC_KINDS

    def raw(self, row: Any) -> Any:
        return self.value(row) if self.value is not None else resolve(row, self.key)

    def display(self, value: Any) -> str:
        if value is None or value == "":
            return MISSING
        # Rounded, never cut off, by the rule the CLI uses (formatting.format_fixed), so a page
        # shows the digits the command line and a rounded CSV/API value show.
        if self.kind == "int":
            return format_fixed(value, 0, grouping=True)
        if self.kind == "float":
            return format_fixed(value, self.digits, grouping=True)
        if self.kind == "pct":
            return format_percent(value, max(self.digits - 2, 0))
        if self.kind == "datetime" and isinstance(value, datetime | date):
            return value.strftime("%Y-%m-%d %H:%M") if isinstance(value, datetime) else str(value)
        return str(value)


# A number no URL of the site holds: reversed in its place once, then replaced per row.
_SLOT = "9876543210123"


@functools.lru_cache(maxsize=64)
def _url_pattern(name: str, prefix: str) -> str:
    return reverse(name, args=[_SLOT])


def row_url(name: str, arg: Any) -> str:
    """``reverse(name, args=[arg])`` for one argument, reversed once per URL name: a board
    page links every row, and each ``reverse`` reads Django's request-local state several
    times (a fifth of an audit page's time)."""
    pattern = _url_pattern(name, get_script_prefix())
    return pattern.replace(_SLOT, quote(str(arg), safe=RFC3986_SUBDELIMS + "/~:@"), 1)


class Cell(NamedTuple):
    # A tuple, not a frozen dataclass: a board page builds thousands of cells, and a frozen
    # dataclass sets each field through object.__setattr__.
    value: Any
    text: str
    numeric: bool
    url: str | None
    detail: bool = False
    shown: bool = True


@dataclass(frozen=True)
class Header:
    column: Column
    sort_url: str | None
    direction: str | None  # "asc", "desc" or None when the table is not sorted by it
    aria_sort: str


@dataclass(frozen=True)
class Row:
    rank: int
    cells: list[Cell]
    source: Any

    @property
    def cells_html(self) -> SafeString:
        """The row's ``<td>`` cells, escaped as the template would: built here because a
        template loop over 100 rows of 20 cells cost most of a board page's time."""
        parts = []
        for cell in self.cells:
            if not cell.shown:
                continue
            classes = ("num" if cell.numeric else "") + (" col-detail" if cell.detail else "")
            attribute = f' class="{classes}"' if classes else ""
            text = _escaped(cell.text)
            if cell.url:
                text = f'<a href="{_escaped(cell.url)}">{text}</a>'
            parts.append(f"<td{attribute}>{text}</td>")
        # Every text and URL was escaped above.
        return mark_safe("".join(parts))


def _escaped(value: Any) -> str:
    """``conditional_escape(localize(value))``, the template's ``{{ value }}``, with a fast
    path for plain text (a cell's text and URL are): Django's ``escape`` checks each call for
    lazy arguments, a tenth of a 200-row page's time."""
    if type(value) is str:
        return html.escape(value)
    return str(conditional_escape(localize(value)))


def _sort_key(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float | Decimal):
        return float(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value).casefold()


class SortableTable:
    """Rows plus columns, sorted as the request asks, ready for the template or a download.

    ``prefix`` separates the query parameters of several tables on one page
    (``?audit-sort=f1``). ``rank`` adds a leading "#" column: the row's own ``rank_key``
    value when it has one, else its position in the given order. ``limit`` keeps the first
    rows after sorting (top-N tables). ``empty_message`` is shown when there are no rows.
    """

    def __init__(
        self,
        request: HttpRequest,
        rows: Iterable[Any] | None,
        columns: Sequence[Column],
        *,
        default_sort: str = "",
        filename: str = "leaderboard",
        prefix: str = "",
        rank: bool = True,
        rank_key: str = "rank",
        limit: int | None = None,
        empty_message: str = "Nothing here yet.",
        caption: str = "",
        table_id: str = "",
    ) -> None:
        self.request = request
        self.columns = list(columns)
        self.filename = slugify(filename) or "table"
        self.prefix = f"{prefix}-" if prefix else ""
        self.show_rank = rank
        self.empty_message = empty_message
        self.caption = caption
        self.table_id = table_id or f"{self.filename}-table"
        self.available = rows is not None
        source = list(rows or [])
        self.total = len(source)
        # A selector that ranks its rows itself (ties, per-suite ranks) wins over position.
        ranked = [
            (resolve(row, rank_key) if resolve(row, rank_key) is not None else position, row)
            for position, row in enumerate(source, start=1)
        ]

        by_key = {c.key: c for c in self.columns if c.sortable}
        self._read_sort(by_key, default_sort)
        if self.sort_key:
            column = by_key[self.sort_key]
            present = [(r, row) for r, row in ranked if column.raw(row) not in (None, "")]
            missing = [(r, row) for r, row in ranked if column.raw(row) in (None, "")]
            present.sort(key=lambda item: _sort_key(column.raw(item[1])), reverse=self.descending)
            # Missing values last whichever way the column is sorted.
            ranked = present + missing
        if limit is not None:
            ranked = ranked[:limit]
        self.rows = [self._row(r, row) for r, row in ranked]

    # Pages of a table whose rows are all in memory: none (see board_tables.BoardTable).
    pager: Any = None

    def _read_sort(self, by_key: Mapping[str, Column], default_sort: str) -> None:
        """``sort_key`` and ``descending`` from ``?<prefix>sort=`` (unknown keys: unsorted)."""
        requested = self.request.GET.get(f"{self.prefix}sort", "") or default_sort
        key = requested.lstrip("-")
        self.sort_key = key if key in by_key else ""
        self.descending = requested.startswith("-") if self.sort_key else False

    def _row(self, rank: Any, row: Any) -> Row:
        return Row(
            rank=rank,
            source=row,
            cells=[
                Cell(
                    value=(value := column.raw(row)),
                    text=column.display(value),
                    numeric=column.numeric,
                    # A missing value ("—") is never a link: a lone blue dash reads as a glitch.
                    url=column.link(row) if column.link and value not in (None, "") else None,
                    detail=column.detail,
                    shown=column.page,
                )
                for column in self.columns
            ],
        )

    @property
    def headers_html(self) -> SafeString:
        """The header row's ``<th>`` cells (after the rank's), escaped as the template would:
        built here for the reason of :attr:`rows_html` (eight lookups a column, two tables a
        page)."""
        parts = []
        for h in self.headers:
            column = h.column
            if not column.page:
                continue
            classes = (
                ("num" if column.numeric else "")
                + (" col-detail" if column.detail else "")
                + (f" sorted {h.direction}" if h.direction else "")
            )
            title = f' title="{_escaped(column.title)}"' if column.title else ""
            label = _escaped(column.label)
            if h.sort_url:
                arrow = {"asc": "▲", "desc": "▼"}.get(h.direction or "", "↕")
                label = (
                    f'<a href="{_escaped(h.sort_url)}">{label}'
                    f'<span class="arrow" aria-hidden="true">{arrow}</span></a>'
                )
            parts.append(
                f'<th scope="col" class="{classes}" aria-sort="{h.aria_sort}" '
                f'data-key="{_escaped(column.key)}"{title}>{label}</th>'
            )
        return mark_safe("".join(parts))

    @property
    def rows_html(self) -> SafeString:
        """Every row's ``<tr>``, the rank cell first when the table shows ranks: built here
        for the reason of :attr:`Row.cells_html` (the template's loop was a fifth of a page)."""
        if self.show_rank:
            return mark_safe(
                "".join(
                    f'<tr{self.row_attributes(row)}><td class="num rank">{_escaped(row.rank)}</td>'
                    f"{row.cells_html}{self.trailing_cells(row)}</tr>"
                    for row in self.rows
                )
            )
        return mark_safe(
            "".join(
                f"<tr{self.row_attributes(row)}>{row.cells_html}{self.trailing_cells(row)}</tr>"
                for row in self.rows
            )
        )

    def row_attributes(self, row: Row) -> str:
        """Attributes of a row's ``<tr>`` (escaped, with a leading space), or ""."""
        return ""

    def trailing_cells(self, row: Row) -> str:
        """Cells (escaped HTML) after a row's own, or "" (see BoardTable): last, so that the
        columns a phone keeps in view (rank, name, metric) stay the first three."""
        return ""

    @property
    def has_detail(self) -> bool:
        """Whether some columns wait behind the "All columns" toggle."""
        return any(c.detail for c in self.columns)

    # --- URLs -----------------------------------------------------------------------------

    def _url(self, **params: str) -> str:
        query = self.request.GET.copy()
        for name, value in params.items():
            query[name] = value
        return f"{self.request.path}?{urlencode(sorted(query.lists()), doseq=True)}"

    @property
    def headers(self) -> list[Header]:
        headers = []
        for column in self.columns:
            if not column.sortable:
                headers.append(Header(column, None, None, "none"))
                continue
            active = column.key == self.sort_key
            direction = ("desc" if self.descending else "asc") if active else None
            # First click sorts numbers best-first (descending) and text A→Z.
            if active:
                next_sort = column.key if self.descending else f"-{column.key}"
            else:
                next_sort = f"-{column.key}" if column.numeric else column.key
            aria = {"asc": "ascending", "desc": "descending"}.get(direction or "", "none")
            headers.append(
                Header(column, self._url(**{f"{self.prefix}sort": next_sort}), direction, aria)
            )
        return headers

    @property
    def csv_url(self) -> str:
        return self._url(**{f"{self.prefix}format": "csv"})

    @property
    def json_url(self) -> str:
        return self._url(**{f"{self.prefix}format": "json"})

    # --- Downloads ------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        """The rows as plain dicts of raw values, in the order shown."""
        return [self._record(row) for row in self.rows]

    @property
    def fields(self) -> list[str]:
        """The keys of a download's records (its CSV header)."""
        return (["rank"] if self.show_rank else []) + [c.key for c in self.columns if c.export]

    def _record(self, row: Row) -> dict[str, Any]:
        record: dict[str, Any] = {"rank": row.rank} if self.show_rank else {}
        for column, cell in zip(self.columns, row.cells, strict=True):
            if column.export:
                record[column.key] = cell.value
        return record

    def download(self) -> HttpResponseBase | None:
        """The CSV or JSON download when the request asks for one, else ``None``."""
        fmt = self.request.GET.get(f"{self.prefix}format", "")
        if fmt == "csv":
            return self._csv()
        if fmt == "json":
            return self._json()
        return None

    def _csv(self) -> HttpResponseBase:
        buffer = io.StringIO()
        records = self.records()
        writer = csv.DictWriter(buffer, fieldnames=self.fields, extrasaction="ignore")
        writer.writeheader()
        for record in records:
            writer.writerow({k: csv_value(v) for k, v in record.items()})
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{self.filename}.csv"'
        return response

    def _json(self) -> HttpResponseBase:
        body = json.dumps(
            {"count": len(self.rows), "results": self.records()}, cls=DjangoJSONEncoder, indent=1
        )
        response = HttpResponse(body, content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{self.filename}.json"'
        return response


def csv_value(value: Any) -> Any:
    """A raw value as a CSV cell: blank for missing, ISO dates, formulas defused."""
    if value is None:
        return ""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, list | dict):
        return json.dumps(value, cls=DjangoJSONEncoder)
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        # Names come from participants: keep spreadsheets from running them as formulas.
        return f"'{value}"
    return value


def infer_columns(rows: Sequence[Any], *, skip: Iterable[str] = ()) -> list[Column]:
    """Columns for rows whose shape is not declared: dict keys or dataclass fields, in order.

    Numbers become right-aligned numeric columns; nested structures are left out.
    """
    if not rows:
        return []
    first = rows[0]
    if isinstance(first, Mapping):
        keys = list(first.keys())
    elif hasattr(first, "__dataclass_fields__"):
        keys = list(first.__dataclass_fields__)
    else:
        keys = [k for k in vars(first) if not k.startswith("_")]
    skipped = set(skip)
    columns = []
    for key in keys:
        if key in skipped:
            continue
        sample = next((resolve(r, key) for r in rows if resolve(r, key) is not None), None)
        if isinstance(sample, list | dict | tuple | set):
            continue
        kind: Kind = "text"
        if isinstance(sample, bool):
            kind = "text"
        elif isinstance(sample, int):
            kind = "int"
        elif isinstance(sample, float | Decimal):
            kind = "float"
        elif isinstance(sample, datetime | date):
            kind = "datetime"
        columns.append(Column(key, key.replace("_", " ").capitalize(), kind=kind))
    return columns
