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
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Model

from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.models.boards import ChecklistBoardRow, ProbeBoardRow

# Up to this many rows (the API's largest page), marks are counted on the board's indexes;
# above it (downloads of a whole board), computed in memory from all the board's columns:
# a 500-row page of a 100,000-row board read the whole board that way (a second).
COUNTED_ROWS_MAX = 500
# Above this many rows, a board of at most IN_MEMORY_BOARD_PER_ROW times as many rows is
# ranked in memory: counting costs about 40 µs a row asked, reading a row about 5 µs.
IN_MEMORY_CHECK_ABOVE = 100
IN_MEMORY_BOARD_PER_ROW = 8
# Counts per statement: SQLite allows 2,000 result columns and 32,766 parameters a
# statement (a count takes at most 20).
COUNTS_PER_STATEMENT = 500

_COMPLEMENT = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


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
class _Row:
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
    """The ORM filter of one board: ``board`` holds a value per :attr:`BoardShape.board`."""
    return {name: board[name] for name in shape.board}


def board_of(shape: BoardShape, row: Any) -> dict[str, Any]:
    """The board a stored row (model instance or ``values()`` dict) is on."""
    return {name: _get(shape, row, name) for name in shape.board}


def _column(shape: BoardShape, name: str) -> str:
    # Looked up for every column of every count of a page (600 a page): once per name.
    return _quoted_column(shape.model, name, connection.vendor)


@functools.lru_cache(maxsize=256)
def _quoted_column(model: type[Model], name: str, vendor: str) -> str:
    field = model._meta.pk if name in ("id", "pk") else model._meta.get_field(name)
    return connection.ops.quote_name(str(field.column))  # type: ignore[union-attr]


def _light_columns(shape: BoardShape) -> list[str]:
    return [*shape.order, "span_low", "span_high", "exact", *([shape.value] if shape.value else [])]


def _rows_from(shape: BoardShape, values: Iterable[Sequence[Any]]) -> list[_Row]:
    n = len(shape.order)
    out = []
    for v in values:
        value = v[n + 4] if shape.value else None
        out.append(
            _Row(
                pk=int(v[0]),
                key=tuple(v[1 : n + 1]),
                low=v[n + 1],
                high=v[n + 2],
                exact=bool(v[n + 3]),
                value=None if value is None else float(value),
            )
        )
    return out


def _light_rows(
    shape: BoardShape, board: Mapping[str, Any], pks: Iterable[int] | None
) -> list[_Row]:
    qs = shape.model._default_manager.filter(**board_filter(shape, board)).order_by()
    if pks is not None:
        qs = qs.filter(pk__in=list(pks))
    columns = ["pk", *_light_columns(shape)]
    key_columns = tuple(c if c != "id" else "pk" for c in columns)
    sql, params = qs.values_list(*key_columns).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return _rows_from(shape, cursor.fetchall())


def _where_board(shape: BoardShape, board: Mapping[str, Any]) -> tuple[str, list[Any]]:
    parts, params = [], []
    for name in shape.board:
        value = board[name]
        column = _column(shape, name)
        if value is None:
            parts.append(f"{column} IS NULL")
        else:
            parts.append(f"{column} = %s")
            params.append(getattr(value, "pk", value))
    return " AND ".join(parts), params


def _compare(columns: Sequence[str], op: str, threshold: Sequence[Any]) -> tuple[str, list[Any]]:
    if len(columns) == 1:
        return f"{columns[0]} {op} %s", [threshold[0]]
    marks = ", ".join(["%s"] * len(columns))
    return f"({', '.join(columns)}) {op} ({marks})", list(threshold)


class _Counts:
    """Counts of board rows under thresholds, gathered and then taken in one statement.

    For each threshold ``t`` of a request: how many rows of the board have ``(names) op t``.
    Thresholds are taken from the end the comparison starts at, each counted over the slice
    of the index between it and the one before, then summed: a request costs at most one
    pass over its index, however many thresholds it has.
    """

    def __init__(self, shape: BoardShape, board: Mapping[str, Any]) -> None:
        self.shape = shape
        self.table = connection.ops.quote_name(shape.model._meta.db_table)
        self.base, self.base_params = _where_board(shape, board)
        self.selects: list[str] = []
        self.params: list[Any] = []
        self.requests: dict[str, list[tuple[Any, ...]]] = {}
        self.numbered: list[int] = []

    def ask_places(self, rows: Sequence[_Row]) -> None:
        """Ask for the place of each of ``rows`` in the board's order, numbered in one pass
        down its order index up to the last of them (PostgreSQL; taken by :meth:`take` as
        ``places``, the first column of the statement). PostgreSQL's index scans do not start
        at a row-value bound behind ``phase IS NULL``, so the slices between scattered rows
        (a page sorted by a column) each read the board from its start: 50 rows, 400 ms at
        100,000."""
        assert not self.selects, "places are asked first"
        columns = [_column(self.shape, name) for name in self.shape.order]
        last, last_params = _compare(columns, "<=", max(r.key for r in rows))
        pk = _column(self.shape, "id")
        # The board's columns lead the window's order, as in own_order: the index is read
        # in order, not sorted.
        order = ", ".join([*(_column(self.shape, name) for name in self.shape.board), *columns])
        wanted = ", ".join(["%s"] * len(rows))
        self.selects.append(
            f"(SELECT array_agg(ARRAY[numbered.pk, numbered.place]) FROM (SELECT "
            f"CAST({pk} AS BIGINT) AS pk, ROW_NUMBER() OVER (ORDER BY {order}) AS place "
            f"FROM {self.table} WHERE {self.base} AND {last}) AS numbered "
            f"WHERE numbered.pk IN ({wanted}))"
        )
        self.params += [*self.base_params, *last_params, *(r.pk for r in rows)]
        self.numbered = [r.pk for r in rows]

    def ask(
        self,
        request: str,
        names: Sequence[str],
        op: str,
        thresholds: Iterable[tuple[Any, ...]],
        where: str = "",
    ) -> None:
        """Ask for counts, by the name ``request`` in what :meth:`take` returns."""
        ordered = sorted(set(thresholds), reverse=op in (">", ">="))
        columns = [_column(self.shape, name) for name in names]
        base = f"{self.base} AND {where}" if where else self.base
        previous: tuple[Any, ...] | None = None
        for threshold in ordered:
            sql, values = _compare(columns, op, threshold)
            condition, params = f"{base} AND {sql}", [*self.base_params, *values]
            if previous is not None:
                since, since_params = _compare(columns, _COMPLEMENT[op], previous)
                condition += f" AND {since}"
                params += since_params
            self.selects.append(f"(SELECT COUNT(*) FROM {self.table} WHERE {condition})")
            self.params += params
            previous = threshold
        self.requests[request] = ordered

    def ask_equal(
        self, request: str, names: Sequence[str], equal: int, key: tuple[Any, ...]
    ) -> None:
        """Ask for the rows whose first ``equal`` columns of ``names`` equal ``key``'s and
        whose whole ``names`` come before ``key`` (by the name ``request``, at ``key``)."""
        columns = [_column(self.shape, name) for name in names]
        same = " AND ".join(f"{c} = %s" for c in columns[:equal])
        rest, values = _compare(columns[equal:], "<", key[equal:])
        self.selects.append(
            f"(SELECT COUNT(*) FROM {self.table} WHERE {self.base} AND {same} AND {rest})"
        )
        self.params += [*self.base_params, *key[:equal], *values]
        self.requests[request] = [key]

    def take(self) -> dict[str, dict[tuple[Any, ...], int]]:
        """Every request's counts by threshold (one statement per COUNTS_PER_STATEMENT)."""
        slices: list[Any] = []
        if self.selects:
            with connection.cursor() as cursor:
                start, first_param = 0, 0
                while start < len(self.selects):
                    chunk = self.selects[start : start + COUNTS_PER_STATEMENT]
                    used = sum(select.count("%s") for select in chunk)
                    cursor.execute(
                        f"SELECT {', '.join(chunk)}",
                        self.params[first_param : first_param + used],
                    )
                    slices += cursor.fetchone()
                    start, first_param = start + len(chunk), first_param + used
        out, start = {}, 0
        if self.numbered:
            pairs: list[list[int]] = slices[0] or []
            slices = slices[1:]
            places = {int(pk): int(place) for pk, place in pairs}
            out["places"] = {(pk,): places[pk] for pk in self.numbered if pk in places}
        for request, ordered in self.requests.items():
            part = np.cumsum(np.asarray(slices[start : start + len(ordered)], dtype=np.int64))
            out[request] = {t: int(n) for t, n in zip(ordered, part.tolist(), strict=True)}
            start += len(ordered)
        return out


def _key(row: _Row) -> tuple[Any, ...]:
    return row.key


def _counted(
    shape: BoardShape,
    board: Mapping[str, Any],
    rows: list[_Row],
    first_position: int | None = None,
) -> dict[int, Marks]:
    counts = _Counts(shape, board)
    ranked = [r for r in rows if r.ranked]
    loose = [r for r in ranked if not r.exact]
    known: dict[tuple[Any, ...], int] | None = None
    consecutive = first_position is not None
    if first_position is not None:
        # Consecutive rows of the board's order (a page of it): their places follow from
        # the first one's. Counting them was the costliest count of a deep page (the rows
        # above, compared on the whole order key: 9 ms at place 90,000).
        known = {r.key: first_position - 1 + i for i, r in enumerate(sorted(rows, key=_key))}
    elif connection.vendor == "postgresql" and len(rows) > 1:
        counts.ask_places(rows)
    else:
        counts.ask("before", shape.order, "<", [r.key for r in rows])
    in_order = sorted(rows, key=_key)
    if shape.shared:
        # Rows with the same numbers (the leading order columns) share a rank: the rank is
        # the place less the rows before it with those numbers (an equality prefix of the
        # order index: a few entries, not the rows above). Consecutive rows count them for
        # their first row only: the others follow from the row above.
        for r in in_order[:1] if consecutive else ranked:
            counts.ask_equal(f"tied {r.pk}", shape.order, shape.shared, r.key)
    counts.ask("above", ["span_low"], ">", [(r.high,) for r in loose])
    counts.ask("reach", ["span_high"], ">=", [(r.low,) for r in loose])
    if shape.value is not None:
        # Against a row whose value is exact, values are compared, not spans.
        true = "TRUE" if connection.vendor == "postgresql" else "1"
        exact = f"{_column(shape, 'exact')} = {true}"
        values = [(r.value,) for r in loose]
        points = [(r.value,) for r in ranked if r.exact]
        counts.ask("exact_above", [shape.value], ">", values, where=exact)
        counts.ask("exact_reach", [shape.value], ">=", values, where=exact)
        counts.ask("all_above", [shape.value], ">", points)
        counts.ask("all_reach", [shape.value], ">=", points)
    taken = counts.take()
    if "places" in taken:
        numbered = taken["places"]
        if len(numbered) < len(rows):  # a row removed meanwhile: counted the other way
            recount = _Counts(shape, board)
            recount.ask("before", shape.order, "<", [r.key for r in rows])
            taken["before"] = recount.take()["before"]
        else:
            known = {r.key: numbered[(r.pk,)] - 1 for r in rows}
    before = known if known is not None else taken["before"]
    above, reach = taken["above"], taken["reach"]

    exact_above, exact_reach = taken.get("exact_above", {}), taken.get("exact_reach", {})
    all_above, all_reach = taken.get("all_above", {}), taken.get("all_reach", {})
    tied: dict[int, int] = {}
    if shape.shared and consecutive:
        above_row: _Row | None = None
        for r in in_order:
            if above_row is None:
                tied[r.pk] = taken[f"tied {r.pk}"][r.key]
            elif above_row.key[: shape.shared] == r.key[: shape.shared]:
                tied[r.pk] = tied[above_row.pk] + 1
            else:
                tied[r.pk] = 0
            above_row = r
    elif shape.shared:
        tied = {r.pk: taken[f"tied {r.pk}"][r.key] for r in ranked}
    out = {}
    for r in rows:
        position = 1 + before[r.key]
        if not r.ranked:
            out[r.pk] = Marks(position, None, None, None)
            continue
        rank = position - tied[r.pk] if shape.shared else position
        if r.exact:
            low, high = 1 + all_above[(r.value,)], all_reach[(r.value,)]
        else:
            low = 1 + above[(r.high,)] + exact_above.get((r.value,), 0)
            high = reach[(r.low,)] + exact_reach.get((r.value,), 0)
        out[r.pk] = Marks(position, rank, low, high)
    return out


def _in_memory(board_rows: list[_Row], wanted: set[int] | None, shared: int) -> dict[int, Marks]:
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


def light_fields(shape: BoardShape) -> list[str]:
    """The fields to read with ``values()`` rows so that marking them reads nothing again."""
    return [_attribute(shape, name) for name in _light_columns(shape) if name != "id"]


def _loaded(shape: BoardShape, row: Any) -> _Row | None:
    """A stored row's light columns where they were read with it (else None: read them)."""
    values = row if isinstance(row, dict) else row.__dict__
    names = [_attribute(shape, name) for name in _light_columns(shape) if name != "id"]
    if not all(name in values for name in names):
        return None
    key = tuple(
        values[_attribute(shape, name)] if name != "id" else _pk(row) for name in shape.order
    )
    return _Row(
        pk=_pk(row),
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
) -> dict[int, Marks]:
    """The marks of the rows ``pks`` of ``board`` (every row: None), by row id. ``rows``: the
    stored rows of ``pks`` where the caller has them (their columns are then not read again).
    ``first_position``: the place of the first of ``pks`` when they are consecutive rows of
    the board in its own order (a page read in that order from the board's start), so that
    places are not counted."""
    wanted = None if pks is None else set(pks)
    if wanted is not None and len(wanted) > IN_MEMORY_CHECK_ABOVE:
        # Many rows of a small board: reading the whole board is cheaper than counting
        # (500 rows of a 1,000-row board: 5 ms in memory, 17 ms counted; of 10,000: 49 / 22).
        board_rows = shape.model._default_manager.filter(**board_filter(shape, board))
        if board_rows.count() <= IN_MEMORY_BOARD_PER_ROW * len(wanted):
            return _in_memory(_light_rows(shape, board, None), wanted, shape.shared)
    if wanted is not None and len(wanted) <= COUNTED_ROWS_MAX:
        if not wanted:
            return {}
        light = [_loaded(shape, row) for row in rows]
        if len(light) != len(wanted) or any(r is None for r in light):
            light = list(_light_rows(shape, board, wanted))
        return _counted(shape, board, [r for r in light if r is not None], first_position)
    return _in_memory(_light_rows(shape, board, None), wanted, shape.shared)


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


def _get(shape: BoardShape, row: Any, name: str) -> Any:
    attribute = _attribute(shape, name)
    if isinstance(row, dict):
        return row[attribute] if attribute in row else row[name]
    return getattr(row, attribute)


def _pk(row: Any) -> int:
    if isinstance(row, dict):
        return int(row["pk"] if "pk" in row else row["id"])
    return int(row.pk)


def _set_marks(row: Any, marks: Marks | None) -> None:
    fields = mark_fields(marks)
    if isinstance(row, dict):
        row.update(fields)
    else:
        for name, value in fields.items():
            setattr(row, name, value)


def attach_marks(
    shape: BoardShape, rows: Sequence[Any], *, first_position: int | None = None
) -> list[Any]:
    """Set ``position``, ``rank``, ``rank_low`` and ``rank_high`` on stored board rows (model
    instances, or ``values()`` dicts with ``pk`` or ``id`` and the board's columns), board by
    board; returns ``rows``. ``first_position``: the place of the first row when ``rows``
    are consecutive rows of one board in its own order, read from its start (a page of the
    whole board, or of its leading ``sort_group``, in the board's order): places are then
    not counted (see :func:`board_marks`)."""
    boards: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        key = tuple(_get(shape, row, name) for name in shape.board)
        boards.setdefault(key, []).append(row)
    if len(boards) > 1:
        first_position = None  # several boards: each counts its own places
    for key, members in boards.items():
        marks = board_marks(
            shape,
            dict(zip(shape.board, key, strict=True)),
            map(_pk, members),
            rows=members,
            first_position=first_position,
        )
        for row in members:
            _set_marks(row, marks.get(_pk(row)))
    return list(rows)


def without_marks(rows: Iterable[Any]) -> Iterator[Any]:
    """``rows`` with empty marks (no place, no rank), for a table that shows none: counting
    a row's place costs a pass over the rows above it, and an audit board's incomplete rows
    come after all of its ranked ones."""
    for row in rows:
        _set_marks(row, None)
        yield row


def with_all_marks(shape: BoardShape, rows: Iterable[Any]) -> Iterator[Any]:
    """``rows`` (a stream, e.g. a whole board's download) with their marks set, each board's
    marks computed once, in memory, when its first row comes."""
    known: dict[tuple[Any, ...], dict[int, Marks]] = {}
    for row in rows:
        key = tuple(_get(shape, row, name) for name in shape.board)
        if key not in known:
            known[key] = board_marks(shape, dict(zip(shape.board, key, strict=True)))
        _set_marks(row, known[key].get(_pk(row)))
        yield row


def own_order(shape: BoardShape) -> list[str]:
    """The ``ORDER BY`` of the board's own order, led by the columns that pick the board."""
    # Foreign keys by their column: ordering by the relation would sort by the related
    # model's own ordering. The board's columns lead although one board's rows share them:
    # PostgreSQL does not take `phase IS NULL` as fixing the phase, so without the phase in
    # the ORDER BY it sorted the whole board for each page (19 ms at 100,000 rows) rather
    # than read its order index, which starts with them.
    return [_attribute(shape, name) for name in (*shape.board, *shape.order)]


# --- Ties with the row above (stored; written by ``services.board_ties``).


def tied_between(above: _Row | None, row: _Row) -> bool:
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
) -> _Row | None:
    """The row right before (``op`` "<") or right after (">") ``key`` in the board's order."""
    table = connection.ops.quote_name(shape.model._meta.db_table)
    columns = [_column(shape, name) for name in shape.order]
    base, params = _where_board(shape, board)
    compare, values = _compare(columns, op, key)
    direction = "DESC" if op == "<" else "ASC"
    select = ", ".join([_column(shape, "id"), *(_column(shape, c) for c in _light_columns(shape))])
    order = ", ".join(f"{c} {direction}" for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {select} FROM {table} WHERE {base} AND {compare} ORDER BY {order} LIMIT 1",
            [*params, *values],
        )
        found = cursor.fetchone()
    return _rows_from(shape, [found])[0] if found else None


def ties_all(shape: BoardShape, rows: Sequence[Any]) -> None:
    """Set the tie of every row of a whole board being written (model instances with their
    order columns, spans and flags set), in memory."""
    light = {
        id(row): _Row(
            pk=0,
            key=tuple(getattr(row, _attribute(shape, name)) or 0 for name in shape.order),
            low=row.span_low,
            high=row.span_high,
            exact=bool(row.exact),
            value=getattr(row, shape.value) if shape.value else None,
        )
        for row in rows
    }
    ordered = sorted(rows, key=lambda row: light[id(row)].key)
    above: _Row | None = None
    for row in ordered:
        setattr(row, shape.tied, tied_between(above, light[id(row)]))
        above = light[id(row)]


def _attribute(shape: BoardShape, name: str) -> str:
    if name in ("id", "pk"):
        return "pk"
    return str(shape.model._meta.get_field(name).attname)  # type: ignore[union-attr]


def key_of(shape: BoardShape, row: Any) -> tuple[Any, ...]:
    """A stored row's order key (model instance)."""
    return tuple(getattr(row, _attribute(shape, name)) for name in shape.order)


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
