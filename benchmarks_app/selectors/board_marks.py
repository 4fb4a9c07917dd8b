"""Places, ranks and rank ranges of board rows, counted when they are read (issue 25).

Every board row stores what it is ranked by: the columns of its board's order (``order``
below, ascending is better, the last one unique), the span its rank range is computed from
(``span_low``/``span_high``: its interval widened to contain its value; null for a row that
is not ranked or whose value is exact), whether its value is exact (``exact``), and its tie
with the row above. A row's place and ranks are not stored: they depend on every other row,
so storing them made one run's end rewrite every row it passed (O(n) per run, O(n²) over a
board's life). They are counted when rows are read, with the definitions of
:func:`scoring.stats.bootstrap.board_ranks`:

* place: 1 + the rows before it in the board's order;
* rank: its place, or (audit, where equal numbers share a rank) 1 + the ranked rows whose
  numbers are better;
* best rank: 1 + the ranked rows whose span lies wholly above its span (against a row whose
  value is exact, the values are compared);
* worst rank: the ranked rows whose span reaches its span, itself included.

Each of those is a count over one of the board's indexes. The counts for the rows of a page
are taken in one statement, each over the slice of the index between two consecutive
thresholds, so a page costs at most one pass over the board's index per mark (a few ms at
100,000 rows) whatever its depth, and a run's end writes its entrant's row and the tie marks
of at most two neighbours. Many rows at once (an export of a whole board) are counted in
memory from the board's columns instead, with the same definitions; a property test holds
both to a full re-ranking.

The boards' shapes and light columns are in :mod:`~benchmarks_app.selectors.board_shapes`, the
counts of a page in :mod:`~benchmarks_app.selectors.board_counts`; this module picks between
counting and ranking in memory, sets the marks on rows, and finds the ties written with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from django.db import connection

from benchmarks_app.selectors.board_counts import counted_marks
from benchmarks_app.selectors.board_shapes import (
    AUDIT_SHAPE,
    CHECKLIST_SHAPE,
    PROBE_SHAPE,
    BoardShape,
    LightRow,
    Marks,
    board_filter,
    board_of,
    column_sql,
    compare_sql,
    field_attribute,
    key_of,
    light_columns,
    light_fields,
    light_rows,
    own_order,
    row_pk,
    row_value,
    rows_from,
    where_board,
)

# The shapes are re-exported: the pages, the API and the board services name them from here.
__all__ = [
    "AUDIT_SHAPE",
    "CHECKLIST_SHAPE",
    "COUNTED_ROWS_MAX",
    "IN_MEMORY_BOARD_PER_ROW",
    "IN_MEMORY_CHECK_ABOVE",
    "PROBE_SHAPE",
    "BoardShape",
    "Marks",
    "attach_marks",
    "board_filter",
    "board_marks",
    "board_of",
    "key_of",
    "light_fields",
    "mark_fields",
    "neighbour",
    "own_order",
    "tied_between",
    "ties_all",
    "with_all_marks",
    "without_marks",
]

# Up to this many rows (the API's largest page), marks are counted on the board's indexes;
# above it (downloads of a whole board), computed in memory from all the board's columns:
# a 500-row page of a 100,000-row board read the whole board that way (a second).
COUNTED_ROWS_MAX = 500
# Above this many rows, a board of at most IN_MEMORY_BOARD_PER_ROW times as many rows is
# ranked in memory: counting costs about 40 µs a row asked, reading a row about 5 µs.
IN_MEMORY_CHECK_ABOVE = 100
IN_MEMORY_BOARD_PER_ROW = 8


def _in_memory(
    board_rows: list[LightRow], wanted: set[int] | None, shared: int
) -> dict[int, Marks]:
    """Every row's marks from all the board's rows, by the same definitions as the counts."""
    ordered = sorted(board_rows, key=lambda r: r.key)
    loose = [r for r in ordered if r.ranked and not r.exact]
    lows = np.sort(np.asarray([r.low for r in loose], dtype=np.float64))
    highs = np.sort(np.asarray([r.high for r in loose], dtype=np.float64))
    exact_values = np.sort(np.asarray([r.value for r in ordered if r.exact], dtype=np.float64))
    ranked_values = np.sort(
        np.asarray([r.value for r in ordered if r.ranked and r.value is not None], dtype=np.float64)
    )
    out = {}
    rank = 0
    previous: tuple[Any, ...] | None = None
    for place, r in enumerate(ordered, start=1):
        if shared and r.ranked and r.key[:shared] != previous:
            rank, previous = place, r.key[:shared]
        if wanted is not None and r.pk not in wanted:
            continue
        if not r.ranked:
            out[r.pk] = Marks(place, None, None, None)
            continue
        if r.exact:
            assert r.value is not None
            low = 1 + len(ranked_values) - int(np.searchsorted(ranked_values, r.value, "right"))
            high = len(ranked_values) - int(np.searchsorted(ranked_values, r.value, "left"))
        else:
            assert r.low is not None and r.high is not None
            low = 1 + len(lows) - int(np.searchsorted(lows, r.high, "right"))
            high = len(highs) - int(np.searchsorted(highs, r.low, "left"))
            if r.value is not None and len(exact_values):
                low += len(exact_values) - int(np.searchsorted(exact_values, r.value, "right"))
                high += len(exact_values) - int(np.searchsorted(exact_values, r.value, "left"))
        out[r.pk] = Marks(place, rank if shared else place, low, high)
    return out


def _loaded(shape: BoardShape, row: Any) -> LightRow | None:
    """A stored row's light columns where they were read with it (else None: read them)."""
    values = row if isinstance(row, dict) else row.__dict__
    names = [field_attribute(shape, name) for name in light_columns(shape) if name != "id"]
    if not all(name in values for name in names):
        return None
    key = tuple(
        values[field_attribute(shape, name)] if name != "id" else row_pk(row)
        for name in shape.order
    )
    return LightRow(
        pk=row_pk(row),
        key=key,
        low=values["span_low"],
        high=values["span_high"],
        exact=bool(values["exact"]),
        value=None if shape.value is None else float(values[shape.value]),
    )


def board_marks(
    shape: BoardShape,
    board: Mapping[str, Any],
    pks: Iterable[int] | None = None,
    *,
    rows: Sequence[Any] = (),
    first_position: int | None = None,
    board_size: int | None = None,
) -> dict[int, Marks]:
    """The marks of the rows ``pks`` of ``board`` (every row: None), by row id. ``rows``: the
    stored rows of ``pks`` where the caller has them (their columns are then not read again).
    ``first_position``: the place of the first of ``pks`` when they are consecutive rows of
    the board in its own order (a page read in that order from the board's start), so that
    places are not counted. ``board_size``: with ``first_position``, the number of the
    board's rows, all of them (a pager's count of the whole board): a page in the board's
    lower half then counts the rows above its thresholds from the board's far end."""
    wanted = None if pks is None else set(pks)
    if wanted is not None and len(wanted) > IN_MEMORY_CHECK_ABOVE:
        # Many rows of a small board: reading the whole board is cheaper than counting
        # (500 rows of a 1,000-row board: 5 ms in memory, 17 ms counted; of 10,000: 49 / 22).
        board_rows = shape.model._default_manager.filter(**board_filter(shape, board))
        if board_rows.count() <= IN_MEMORY_BOARD_PER_ROW * len(wanted):
            return _in_memory(light_rows(shape, board, None), wanted, shape.shared)
    if wanted is not None and len(wanted) <= COUNTED_ROWS_MAX:
        if not wanted:
            return {}
        light = [_loaded(shape, row) for row in rows]
        if len(light) != len(wanted) or any(r is None for r in light):
            light = list(light_rows(shape, board, wanted))
        return counted_marks(
            shape, board, [r for r in light if r is not None], first_position, board_size
        )
    return _in_memory(light_rows(shape, board, None), wanted, shape.shared)


def mark_fields(marks: Marks | None) -> dict[str, int | None]:
    """A row's marks as the keys pages and the API show (``position``, ``rank``, ...)."""
    if marks is None:
        return {"position": None, "rank": None, "rank_low": None, "rank_high": None}
    return {
        "position": marks.position,
        "rank": marks.rank,
        "rank_low": marks.rank_low,
        "rank_high": marks.rank_high,
    }


def _set_marks(row: Any, marks: Marks | None) -> None:
    fields = mark_fields(marks)
    if isinstance(row, dict):
        row.update(fields)
    else:
        for name, value in fields.items():
            setattr(row, name, value)


def attach_marks(
    shape: BoardShape,
    rows: Sequence[Any],
    *,
    first_position: int | None = None,
    board_size: int | None = None,
) -> list[Any]:
    """Set ``position``, ``rank``, ``rank_low`` and ``rank_high`` on stored board rows (model
    instances, or ``values()`` dicts with ``pk`` or ``id`` and the board's columns), board by
    board; returns ``rows``. ``first_position``: the place of the first row when ``rows``
    are consecutive rows of one board in its own order, read from its start (a page of the
    whole board, or of its leading ``sort_group``, in the board's order): places are then
    not counted. ``board_size``: the number of rows of that board, all of them, where the
    caller counted them (see :func:`board_marks`; never the count of a leading group)."""
    boards: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        key = tuple(row_value(shape, row, name) for name in shape.board)
        boards.setdefault(key, []).append(row)
    if len(boards) > 1:
        first_position = None  # several boards: each counts its own places
        board_size = None
    for key, members in boards.items():
        marks = board_marks(
            shape,
            dict(zip(shape.board, key, strict=True)),
            map(row_pk, members),
            rows=members,
            first_position=first_position,
            board_size=board_size,
        )
        for row in members:
            _set_marks(row, marks.get(row_pk(row)))
    return list(rows)


def without_marks(rows: Iterable[Any]) -> Iterator[Any]:
    """``rows`` with empty marks (no place, no rank), for a table that shows none: counting
    a row's place costs a pass over the rows above it, and an audit board's incomplete rows
    come after all of its ranked ones."""
    for row in rows:
        _set_marks(row, None)
        yield row


# --- Ties with the row above (stored; written by ``services.board_ties``).


def with_all_marks(shape: BoardShape, rows: Iterable[Any]) -> Iterator[Any]:
    """``rows`` (a stream, e.g. a whole board's download) with their marks set, each board's
    marks computed once, in memory, when its first row comes."""
    known: dict[tuple[Any, ...], dict[int, Marks]] = {}
    for row in rows:
        key = tuple(row_value(shape, row, name) for name in shape.board)
        if key not in known:
            known[key] = board_marks(shape, dict(zip(shape.board, key, strict=True)))
        _set_marks(row, known[key].get(row_pk(row)))
        yield row


def tied_between(above: LightRow | None, row: LightRow) -> bool:
    """Whether ``row`` is tied with ``above``, the row right above it (as ``board_ranks``)."""
    if above is None or not row.ranked or not above.ranked:
        return False
    if row.exact or above.exact:
        return row.value == above.value
    assert row.low is not None and row.high is not None
    assert above.low is not None and above.high is not None
    return row.low <= above.high and above.low <= row.high


def neighbour(
    shape: BoardShape, board: Mapping[str, Any], key: tuple[Any, ...], op: str
) -> LightRow | None:
    """The row right before (``op`` "<") or right after (">") ``key`` in the board's order."""
    table = connection.ops.quote_name(shape.model._meta.db_table)
    columns = [column_sql(shape, name) for name in shape.order]
    base, params = where_board(shape, board)
    compare, values = compare_sql(columns, op, key)
    direction = "DESC" if op == "<" else "ASC"
    select = ", ".join(
        [column_sql(shape, "id"), *(column_sql(shape, c) for c in light_columns(shape))]
    )
    order = ", ".join(f"{c} {direction}" for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {select} FROM {table} WHERE {base} AND {compare} ORDER BY {order} LIMIT 1",
            [*params, *values],
        )
        found = cursor.fetchone()
    return rows_from(shape, [found])[0] if found else None


def ties_all(shape: BoardShape, rows: Sequence[Any]) -> None:
    """Set the tie of every row of a whole board being written (model instances with their
    order columns, spans and flags set), in memory."""
    light = {
        id(row): LightRow(
            pk=0,
            key=tuple(getattr(row, field_attribute(shape, name)) or 0 for name in shape.order),
            low=row.span_low,
            high=row.span_high,
            exact=bool(row.exact),
            value=getattr(row, shape.value) if shape.value else None,
        )
        for row in rows
    }
    ordered = sorted(rows, key=lambda row: light[id(row)].key)
    above: LightRow | None = None
    for row in ordered:
        setattr(row, shape.tied, tied_between(above, light[id(row)]))
        above = light[id(row)]
