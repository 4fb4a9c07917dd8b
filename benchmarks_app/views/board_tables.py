"""A sortable table read page by page from a board's stored rows.

:class:`BoardTable` is the :class:`~benchmarks_app.views.tables.SortableTable` of the
leaderboard pages: it takes the queryset of the rows a user may see (from the board's
selector), an ordering map (column key → stored column or expression, as the API's
``ordering_columns``) and a function turning a stored row into the row dict the columns
read. ``?<prefix>sort=col`` / ``-col`` becomes ``ORDER BY`` (missing values last both ways,
then the board's own order); ``?<prefix>page=N`` picks 100 rows. A page is a count and one
query for its rows, whatever the number of entrants. The rank column is the stored rank,
so sorting does not renumber the entries.

Downloads (``?<prefix>format=csv|json``) still carry the whole board in the order asked
for, streamed from ``.iterator()`` so that memory stays flat however long the board is.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils.safestring import SafeString, mark_safe

from benchmarks_app.formatting import whole_number
from benchmarks_app.selectors.board_marks import (
    BoardShape,
    attach_marks,
    own_order,
    with_all_marks,
    without_marks,
)
from benchmarks_app.selectors.board_ordering import Column as OrderColumn
from benchmarks_app.selectors.board_ordering import board_order_by, page_slice
from benchmarks_app.views.tables import Column, SortableTable, csv_value, resolve

PAGE_SIZE = 100


@dataclass(frozen=True)
class BoardReading:
    """What a ranked board page shows around its table: the legend of its marks, a forest
    plot of its page's rows, a "Compare" checkbox per row and the reader's own rows
    highlighted ("you are here").

    ``noun``: the board's entries (scanners, models, entries); ``value_key``, ``low_key``,
    ``high_key`` and ``label_key``: the row dict's metric, interval and name; ``percent``:
    the metric is shown as a percentage; ``mine``: whether a row dict is the reader's own;
    ``rule_fixed``: whether its place is fixed by the benchmark's rule; ``tie_key``: its
    interval-overlap tie flag.
    """

    noun: str
    value_key: str
    label_key: str
    percent: bool = False
    low_key: str = "ci_low"
    high_key: str = "ci_high"
    tie_key: str = "tied"
    mine: Callable[[Any], bool] | None = None
    rule_fixed: Callable[[Any], bool] | None = None


# Rows read from the database per round trip while a download streams.
CHUNK_SIZE = 1000


@dataclass(frozen=True)
class Pager:
    """Where a page sits in its table: its rows' span and links to its neighbours."""

    number: int
    count: int
    first: int  # 1-based number of the page's first row (0 on an empty table)
    last: int
    total: int
    previous_url: str | None
    next_url: str | None

    @property
    def several(self) -> bool:
        return self.count > 1


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _page_number(raw: str) -> int:
    # A page number that is not a positive integer is the first page, as an unknown sort
    # key is the default order: a link cut short still shows the board.
    return whole_number(raw, maximum=10**9 - 1) or 1


class BoardTable(SortableTable):
    """A page of a board's stored rows, sorted in the database; downloads stream all rows.

    ``queryset``: the rows the user may see (``None``: the table is not available).
    ``ordering``: sortable column key → stored column (field path or expression); a column
    without an entry is not sortable. ``row``: a stored row (model or values dict) → the dict
    the columns read. ``shape``: the board's model and order (its rows' places and ranks are
    counted for the rows shown, :mod:`benchmarks_app.selectors.board_marks`); ``board_order``:
    the board's own order, which breaks ties (default: the shape's).
    ``limit``: show (and download) only the first rows, without pages (top-N tables); the
    board's rows are then not counted (``total`` is the number of rows shown).
    ``places_from_offset``: the queryset holds the board's first rows in its own order (the
    whole board, or its leading ``sort_group``): a page in that order then takes its rows'
    places from its offset instead of counting them (see
    :func:`~benchmarks_app.selectors.board_marks.attach_marks`). Leave it False where the
    viewer sees only some rows of the board.
    ``whole_board``: with ``places_from_offset``, the queryset is every row of one board, or
    its leading group followed by ``rows_after`` rows (the audit board's incomplete entries,
    a table of their own): its count plus those is the board's size, and a page in the
    board's lower half counts its marks from the board's end.
    ``marks``: False for a table that shows no place or rank (its rows get empty marks
    instead of counted ones).
    ``fields``: read the rows as ``values(*fields)`` dicts (the queryset stays a model one,
    so the count and the page's keys are read without the joins its related fields need).
    """

    def __init__(
        self,
        request: HttpRequest,
        queryset: QuerySet[Any] | None,
        columns: Sequence[Column],
        *,
        ordering: Mapping[str, OrderColumn],
        row: Callable[[Any], Any],
        shape: BoardShape,
        board_order: Sequence[Any] | None = None,
        default_sort: str = "",
        filename: str = "leaderboard",
        prefix: str = "",
        rank: bool = True,
        rank_key: str = "rank",
        limit: int | None = None,
        fields: Sequence[str] = (),
        marks: bool = True,
        places_from_offset: bool = False,
        whole_board: bool = False,
        rows_after: int = 0,
        page_size: int = PAGE_SIZE,
        empty_message: str = "Nothing here yet.",
        caption: str = "",
        table_id: str = "",
        reading: BoardReading | None = None,
    ) -> None:
        self.reading = reading
        # The base class with no rows sets the names, URLs and messages; rows come below.
        super().__init__(
            request,
            None,
            [c if c.key in ordering else dataclasses.replace(c, sortable=False) for c in columns],
            filename=filename,
            prefix=prefix,
            rank=rank,
            empty_message=empty_message,
            caption=caption,
            table_id=table_id,
        )
        self.available = queryset is not None
        self.rank_key = rank_key
        self.limit = limit
        self.value_fields = tuple(fields)
        self.marks = marks
        # Only in the board's own order: a column's order puts rows of any place on a page.
        self.places_from_offset = places_from_offset and board_order is None
        self.whole_board = whole_board
        self.rows_after = rows_after
        self.to_row = row
        self.shape = shape
        if board_order is None:
            board_order = own_order(shape)
        by_key = {c.key: c for c in self.columns if c.sortable}
        self._read_sort(by_key, default_sort)
        terms = [(self.sort_key, self.descending)] if self.sort_key else []
        if terms:
            self.places_from_offset = False
        self.queryset: QuerySet[Any] | None = (
            None
            if queryset is None
            else queryset.order_by(*board_order_by(terms, ordering, board_order))
        )
        if self.queryset is None:
            self.total = 0
            return
        if limit is not None:
            # A top-N table counts only what it shows: the board's COUNT(*) is a pass over
            # its index (4 ms at 100,000 rows, three tables on the home page), and the table
            # links to the full board, which counts its entries.
            top = self.queryset[:limit]
            if self.wants_download:
                self.total = top.count()
                return
            self.rows = self._rows(
                page_slice(self.queryset, 0, limit, fields=self.value_fields), offset=0
            )
            self.total = len(self.rows)
            return
        self.total = self.queryset.count()
        if self.total == 0 or self.wants_download:
            return
        pages = max(1, -(-self.total // page_size))
        number = min(_page_number(request.GET.get(f"{self.prefix}page", "")), pages)
        offset = (number - 1) * page_size
        self.rows = self._rows(
            page_slice(
                self.queryset,
                offset,
                offset + page_size,
                fields=self.value_fields,
                total=self.total,
            ),
            offset=offset,
        )
        self.pager = Pager(
            number=number,
            count=pages,
            first=offset + 1,
            last=offset + len(self.rows),
            total=self.total,
            previous_url=self._page_url(number - 1) if number > 1 else None,
            next_url=self._page_url(number + 1) if number < pages else None,
        )

    # --- The reading around the table (BoardReading) ---------------------------------------

    @property
    def board_key(self) -> str:
        """The key of the board the page's rows are on ("" without rows or a reading)."""
        if self.reading is None:
            return ""
        return next((str(r.source["board"]) for r in self.rows if r.source.get("board")), "")

    @property
    def compare_form_id(self) -> str:
        """The id of the form the rows' "Compare" checkboxes belong to ("" for none): only a
        ranked page with two rows or more."""
        if not self.board_key or len(self.rows) < 2 or not self.show_rank:
            return ""
        return f"{self.table_id}-compare"

    def trailing_cells(self, row: Any) -> str:
        form = self.compare_form_id
        if not form:
            return ""
        source = row.source
        label = ""
        if self.reading is not None:
            label = str(source.get(self.reading.label_key) or "")
        return (
            f'<td class="pick"><input type="checkbox" name="row" value="{int(source["id"])}" '
            f'form="{html.escape(form)}" aria-label="Compare {html.escape(label)}"></td>'
        )

    def row_attributes(self, row: Any) -> str:
        if self.reading is None or self.reading.mine is None or not self.reading.mine(row.source):
            return ""
        return ' class="mine" aria-current="true" title="You are here: your own entry"'

    @property
    def mark_legend(self) -> str:
        from benchmarks_app.views.paired import mark_legend

        if self.reading is None or not self.show_rank:
            return ""
        return mark_legend([r.source for r in self.rows], noun=self.reading.noun)

    @property
    def forest_svg(self) -> SafeString:
        """A forest plot of the page's rows, in the order shown (empty without a reading)."""
        from benchmarks_app.views.forest import ForestPoint, forest_svg
        from benchmarks_app.views.paired import board_mark_columns

        reading = self.reading
        if reading is None or not self.rows or not self.show_rank:
            return mark_safe("")
        tie = next(
            c for c in board_mark_columns(reading.noun, tie_key=reading.tie_key) if c.key == "tied"
        )
        points = []
        for row in self.rows:
            source = row.source
            points.append(
                ForestPoint(
                    label=str(source.get(reading.label_key) or ""),
                    value=_number(source.get(reading.value_key)),
                    low=_number(source.get(reading.low_key)),
                    high=_number(source.get(reading.high_key)),
                    tied_with_above=bool(tie.raw(source)) and tie.raw(source) != "below by rule",
                    rule_fixed=bool(reading.rule_fixed and reading.rule_fixed(source)),
                    mine=bool(reading.mine and reading.mine(source)),
                )
            )
        return forest_svg(
            points,
            percent=reading.percent,
            title=f"Forest plot of the {reading.noun} on this page: each dot is an entry's "
            "value, its whisker the 95% interval; rows tied with the row above are joined "
            "on the left and share a colour",
        )

    @property
    def wants_download(self) -> bool:
        return self.request.GET.get(f"{self.prefix}format", "") in ("csv", "json")

    def _page_url(self, number: int) -> str:
        return self._url(**{f"{self.prefix}page": str(number)})

    def _rank(self, source: Any, position: int) -> Any:
        stored = resolve(source, self.rank_key)
        return stored if stored is not None else position

    def _rows(self, stored: Any, *, offset: int) -> list[Any]:
        rows = []
        first = offset + 1 if self.places_from_offset else None
        size = self.total + self.rows_after if first is not None and self.whole_board else None
        marked = (
            attach_marks(self.shape, list(stored), first_position=first, board_size=size)
            if self.marks
            else without_marks(stored)
        )
        for index, obj in enumerate(marked, start=offset + 1):
            source = self.to_row(obj)
            rows.append(self._row(self._rank(source, index), source))
        return rows

    # --- Downloads: the whole board, streamed -------------------------------------------

    def _all_records(self) -> Iterator[dict[str, Any]]:
        if self.queryset is None:
            return
        stored = self.queryset.values(*self.value_fields) if self.value_fields else self.queryset
        if self.limit is not None:
            stored = stored[: self.limit]
        streamed = stored.iterator(chunk_size=CHUNK_SIZE)
        marked = with_all_marks(self.shape, streamed) if self.marks else without_marks(streamed)
        for index, obj in enumerate(marked, start=1):
            source = self.to_row(obj)
            yield self._record(self._row(self._rank(source, index), source))

    def records(self) -> list[dict[str, Any]]:
        """Every row of the board (not only the page) as plain dicts, in the order asked."""
        return list(self._all_records())

    def _csv(self) -> StreamingHttpResponse:
        def lines() -> Iterator[str]:
            buffer = io.StringIO()
            writer = csv.DictWriter(buffer, fieldnames=self.fields, extrasaction="ignore")
            writer.writeheader()
            for record in self._all_records():
                writer.writerow({k: csv_value(v) for k, v in record.items()})
                if buffer.tell() > 64 * 1024:
                    yield buffer.getvalue()
                    buffer.seek(0)
                    buffer.truncate()
            yield buffer.getvalue()

        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{self.filename}.csv"'
        return response

    def _json(self) -> StreamingHttpResponse:
        count = self.total

        def parts() -> Iterator[str]:
            yield f'{{"count": {count}, "results": ['
            for index, record in enumerate(self._all_records()):
                yield ("," if index else "") + "\n" + json.dumps(record, cls=DjangoJSONEncoder)
            yield "\n]}\n"

        response = StreamingHttpResponse(parts(), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{self.filename}.json"'
        return response
