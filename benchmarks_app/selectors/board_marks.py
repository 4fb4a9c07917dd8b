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
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Model

from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.models.boards import ChecklistBoardRow, ProbeBoardRow
from benchmarks_app.models.common import phase_key_of

# Up to this many rows (the API's largest page), marks are counted on the board's indexes;
# above it (downloads of a whole board), computed in memory from all the board's columns:
# a 500-row page of a 100,000-row board read the whole board that way (a second).
COUNTED_ROWS_MAX = 500
# Above this many rows, a board of at most IN_MEMORY_BOARD_PER_ROW times as many rows is
# ranked in memory: counting costs about 40 µs a row asked, reading a row about 5 µs.
IN_MEMORY_CHECK_ABOVE = 100
IN_MEMORY_BOARD_PER_ROW = 8
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
    """The ORM filter of one board: ``board`` holds a value per :attr:`BoardShape.board`.
    The phase is matched by its ``phase_key`` (never NULL), which the indexes lead with."""
    return {_key_name(name): _key_value(name, board[name]) for name in shape.board}


def _key_name(name: str) -> str:
    return "phase_key" if name == "phase" else name


def _key_value(name: str, value: Any) -> Any:
    return phase_key_of(value) if name == "phase" else getattr(value, "pk", value)


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
    names = [_key_name(name) for name in shape.board]
    parts = [f"{_column(shape, name)} = %s" for name in names]
    return " AND ".join(parts), [_key_value(name, board[name]) for name in shape.board]


def _row_compare(columns: Sequence[str], op: str, values: Sequence[str]) -> str:
    if len(columns) == 1:
        return f"{columns[0]} {op} {values[0]}"
    return f"({', '.join(columns)}) {op} ({', '.join(values)})"


def _db_type(shape: BoardShape, name: str) -> str:
    field = shape.model._meta.pk if name in ("id", "pk") else shape.model._meta.get_field(name)
    return str(field.db_type(connection))  # type: ignore[union-attr]


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

    The slices of a request (more than two) are counted by one subquery run once per row of
    a VALUES list of their bounds: a database plans every subquery of a statement against
    the table's indexes, and a page's hundred slices cost PostgreSQL 18-32 ms to plan (2-5
    ms to run) at 100,000 rows; SQLite, whose connections (one a request) keep no prepared
    statements, 10-18 ms a sorted page (its marks took 11-18 ms more on a new connection
    than on a kept one; 2-4 ms more now). PostgreSQL's index scans (up to 16 at least) stop
    at a row-value upper bound only when the bound's first column passes, so a slice bounded
    by a whole order key (leading columns shared by most rows) read the board to its end:
    such a slice is counted as the index ranges it is made of, each bounded on one column
    behind equalities; on SQLite too, which compares every entry of a range bounded by whole
    row values on all the order's columns (the rows before a sorted page's keys: 16 ms at
    100,000 rows, 7 as ranges).
    """

    def __init__(self, shape: BoardShape, board: Mapping[str, Any]) -> None:
        self.shape = shape
        self.table = connection.ops.quote_name(shape.model._meta.db_table)
        self.base, self.base_params = _where_board(shape, board)
        self.selects: list[str] = []
        self.params: list[Any] = []
        self.requests: dict[str, list[tuple[Any, ...]]] = {}
        # Requests whose counts are taken as they are (each its own), not summed slices.
        self.plain: set[str] = set()
        # Where each select's result goes: None, one count of the flat list; "array",
        # counts of the flat list; (request, slice indexes), counts of those slices.
        self.kinds: list[str | tuple[str, list[int]] | None] = []

    def _select(self, sql: str, params: Sequence[Any], kind: Any = None) -> None:
        self.selects.append(sql)
        self.params += params
        self.kinds.append(kind)

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
        self.requests[request] = ordered
        if len(names) > 1 and ordered:
            self._ask_ranges(request, names, op, ordered, base)
            return
        if len(ordered) > 2:
            self._ask_listed(names, op, ordered, base)
            return
        previous: tuple[Any, ...] | None = None
        for threshold in ordered:
            sql, values = _compare(columns, op, threshold)
            condition, params = f"{base} AND {sql}", [*self.base_params, *values]
            if previous is not None:
                since, since_params = _compare(columns, _COMPLEMENT[op], previous)
                condition += f" AND {since}"
                params += since_params
            self._select(f"(SELECT COUNT(*) FROM {self.table} WHERE {condition})", params)
            previous = threshold

    def _listed(
        self, count: str, rows: Sequence[Sequence[Any]], base_uses: int
    ) -> tuple[str, list[Any]]:
        """``count`` (SQL reading the VALUES row as ``v.column2``...) for each of ``rows``
        (their first value: the order of the array), as one array (on SQLite, a JSON array
        of [order, count] pairs, which :meth:`take` sorts)."""
        width = ", ".join(["%s"] * len(rows[0]))
        values = ", ".join([f"({width})"] * len(rows))
        if connection.vendor == "postgresql":
            gathered = f"array_agg(({count}) ORDER BY v.column1)"
        else:
            gathered = f"json_group_array(json_array(v.column1, ({count})))"
        sql = f"(SELECT {gathered} FROM (VALUES {values}) AS v)"
        return sql, [*self.base_params * base_uses, *(value for row in rows for value in row)]

    def _cast(self, names: Sequence[str], first: int) -> list[str]:
        return [
            f"CAST(v.column{first + k} AS {_db_type(self.shape, name)})"
            for k, name in enumerate(names)
        ]

    def _ask_listed(
        self, names: Sequence[str], op: str, ordered: list[tuple[Any, ...]], base: str
    ) -> None:
        # The first slice has no lower bound: a subquery of its own.
        columns = [_column(self.shape, name) for name in names]
        first, first_params = _compare(columns, op, ordered[0])
        self._select(
            f"(SELECT COUNT(*) FROM {self.table} WHERE {base} AND {first})",
            [*self.base_params, *first_params],
        )
        bound = self._cast(names, 2)
        since = self._cast(names, 2 + len(names))
        count = (
            f"SELECT COUNT(*) FROM {self.table} WHERE {base} "
            f"AND {_row_compare(columns, op, bound)} "
            f"AND {_row_compare(columns, _COMPLEMENT[op], since)}"
        )
        rows = [(i, *ordered[i], *ordered[i - 1]) for i in range(1, len(ordered))]
        self._select(*self._listed(count, rows, 1), kind="array")

    def _ask_ranges(
        self,
        request: str,
        names: Sequence[str],
        op: str,
        ordered: list[tuple[Any, ...]],
        base: str,
    ) -> None:
        # The slice [low, high) of the order (low None: from the board's first row), with p
        # the columns low and high share: those p equal, then low's row (column p equal,
        # the rest at least low's), the rows strictly between on column p, and high's side
        # (column p equal to high's, then for each later column j: the columns before it
        # equal to high's and column j below). Each is an index range bounded on its first
        # unequal column. Slices with the same p share their SQL: one subquery per p.
        assert op == "<", "rows before keys"
        columns = [_column(self.shape, name) for name in names]
        width = len(names)
        by_shared: dict[int, list[int]] = {}
        for i, high in enumerate(ordered):
            shared = -1
            if i:
                low = ordered[i - 1]
                shared = next(k for k in range(width) if low[k] != high[k])
            by_shared.setdefault(shared, []).append(i)
        for shared, slices in by_shared.items():
            if shared < 0:
                high_at, low_at = self._cast(names, 2), None
                rows = [(i, *ordered[i]) for i in slices]
            else:
                low_at, high_at = self._cast(names, 2), self._cast(names, 2 + width)
                rows = [(i, *ordered[i - 1], *ordered[i]) for i in slices]
            pieces = []
            start = max(shared, 0)
            equal = [f"{columns[k]} = {high_at[k]}" for k in range(start)]
            if low_at is not None:
                low_side = [*equal, f"{columns[shared]} = {low_at[shared]}"]
                if shared + 1 < width:
                    rest = list(range(shared + 1, width))
                    low_side.append(
                        _row_compare([columns[k] for k in rest], ">=", [low_at[k] for k in rest])
                    )
                pieces.append(low_side)
                pieces.append(
                    [
                        *equal,
                        f"{columns[shared]} > {low_at[shared]}",
                        f"{columns[shared]} < {high_at[shared]}",
                    ]
                )
                start = shared + 1
            for j in range(start, width):
                pieces.append(
                    [
                        *equal,
                        *(f"{columns[k]} = {high_at[k]}" for k in range(max(shared, 0), j)),
                        f"{columns[j]} < {high_at[j]}",
                    ]
                )
            count = " + ".join(
                f"(SELECT COUNT(*) FROM {self.table} WHERE {base} AND {' AND '.join(piece)})"
                for piece in pieces
            )
            sql, params = self._listed(count, rows, len(pieces))
            self._select(sql, params, kind=(request, slices))

    def ask_equal(
        self, request: str, names: Sequence[str], equal: int, keys: Iterable[tuple[Any, ...]]
    ) -> None:
        """Ask, for each of ``keys``, for the rows whose first ``equal`` columns of ``names``
        equal the key's and whose whole ``names`` come before it (by the name ``request``,
        at each key; counted each, not summed)."""
        ordered = sorted(set(keys))
        columns = [_column(self.shape, name) for name in names]
        self.requests[request] = ordered
        self.plain.add(request)
        if len(ordered) > 2:
            given = self._cast(names, 2)
            same = " AND ".join(f"{columns[k]} = {given[k]}" for k in range(equal))
            rest = _row_compare(columns[equal:], "<", given[equal:])
            count = f"SELECT COUNT(*) FROM {self.table} WHERE {self.base} AND {same} AND {rest}"
            rows = [(i, *key) for i, key in enumerate(ordered)]
            self._select(*self._listed(count, rows, 1), kind="array")
            return
        same = " AND ".join(f"{c} = %s" for c in columns[:equal])
        for key in ordered:
            rest, values = _compare(columns[equal:], "<", key[equal:])
            self._select(
                f"(SELECT COUNT(*) FROM {self.table} WHERE {self.base} AND {same} AND {rest})",
                [*self.base_params, *key[:equal], *values],
            )

    def ask_nulls(self, request: str, name: str) -> None:
        """Ask for the board's rows without a ``name`` (by the name ``request``, at ``()``):
        a range at one end of the column's index."""
        self.requests[request] = [()]
        self.plain.add(request)
        self._select(
            f"(SELECT COUNT(*) FROM {self.table} WHERE {self.base} "
            f"AND {_column(self.shape, name)} IS NULL)",
            self.base_params,
        )

    def take(self) -> dict[str, dict[tuple[Any, ...], int]]:
        """Every request's counts by threshold, in one statement: a request of more than two
        thresholds is one subquery over a VALUES list, so a statement holds a few subqueries
        (SQLite allows 2,000 result columns; a sorted 500-row audit page, the widest, binds
        12,820 of its 32,766 parameters)."""
        results: list[Any] = []
        if self.selects:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT {', '.join(self.selects)}", self.params)
                results = list(cursor.fetchone())
        flat: list[int] = []
        scattered: dict[str, np.ndarray] = {}
        for kind, result in zip(self.kinds, results, strict=True):
            if kind is None:
                flat.append(result)
            elif isinstance(kind, str):  # "array"
                flat += _array(result)
            else:
                request, slices = kind
                counts = scattered.setdefault(
                    request, np.zeros(len(self.requests[request]), dtype=np.int64)
                )
                counts[slices] += np.asarray(_array(result), dtype=np.int64)
        out, start = {}, 0
        for request, ordered in self.requests.items():
            if request in scattered:
                part = scattered[request]
            else:
                part = np.asarray(flat[start : start + len(ordered)], dtype=np.int64)
                start += len(ordered)
            if request not in self.plain:
                part = np.cumsum(part)
            out[request] = {t: int(n) for t, n in zip(ordered, part.tolist(), strict=True)}
        return out


def _array(result: Any) -> list[int]:
    """The counts of one listed subquery, in the order of its VALUES rows' first column."""
    if isinstance(result, str):  # SQLite: a JSON array of [order, count] pairs
        return [count for _, count in sorted(json.loads(result))]
    return list(result)


def _key(row: _Row) -> tuple[Any, ...]:
    return row.key


def _counted(
    shape: BoardShape,
    board: Mapping[str, Any],
    rows: list[_Row],
    first_position: int | None = None,
    board_size: int | None = None,
) -> dict[int, Marks]:
    counts = _Counts(shape, board)
    # A page in the lower half of its board's order (its size known: the pager counted it):
    # its spans and values sit low, so the rows above a threshold are most of the board. They
    # are counted as the board less the rows without a value (a range at one end of the
    # index) and the rows at or below it (a short range), instead of a pass over the rest.
    from_end = (
        board_size is not None
        and first_position is not None
        and 2 * (first_position - 1) >= board_size
    )
    complemented: set[str] = set()

    def ask_above(request: str, name: str, op: str, thresholds: list[tuple[Any, ...]]) -> None:
        if not from_end or not thresholds:
            counts.ask(request, [name], op, thresholds)
            return
        counts.ask(request, [name], _COMPLEMENT[op], thresholds)
        counts.ask_nulls(f"{request}:null", name)
        complemented.add(request)

    ranked = [r for r in rows if r.ranked]
    loose = [r for r in ranked if not r.exact]
    known: dict[tuple[Any, ...], int] | None = None
    consecutive = first_position is not None
    if first_position is not None:
        # Consecutive rows of the board's order (a page of it): their places follow from
        # the first one's. Counting them was the costliest count of a deep page (the rows
        # above, compared on the whole order key: 9 ms at place 90,000).
        known = {r.key: first_position - 1 + i for i, r in enumerate(sorted(rows, key=_key))}
    else:
        counts.ask("before", shape.order, "<", [r.key for r in rows])
    in_order = sorted(rows, key=_key)
    if shape.shared:
        # Rows with the same numbers (the leading order columns) share a rank: the rank is
        # the place less the rows before it with those numbers (an equality prefix of the
        # order index: a few entries, not the rows above). Consecutive rows count them for
        # their first row only: the others follow from the row above.
        asked = in_order[:1] if consecutive else ranked
        counts.ask_equal("tied", shape.order, shape.shared, [r.key for r in asked])
    ask_above("above", "span_low", ">", [(r.high,) for r in loose])
    ask_above("reach", "span_high", ">=", [(r.low,) for r in loose])
    if shape.value is not None:
        # Against a row whose value is exact, values are compared, not spans.
        true = "TRUE" if connection.vendor == "postgresql" else "1"
        exact = f"{_column(shape, 'exact')} = {true}"
        values = [(r.value,) for r in loose]
        points = [(r.value,) for r in ranked if r.exact]
        counts.ask("exact_above", [shape.value], ">", values, where=exact)
        counts.ask("exact_reach", [shape.value], ">=", values, where=exact)
        ask_above("all_above", shape.value, ">", points)
        ask_above("all_reach", shape.value, ">=", points)
    taken = counts.take()
    for request in complemented:
        assert board_size is not None
        valued = board_size - taken[f"{request}:null"][()]
        taken[request] = {t: valued - n for t, n in taken[request].items()}
    before = known if known is not None else taken["before"]
    above, reach = taken["above"], taken["reach"]

    exact_above, exact_reach = taken.get("exact_above", {}), taken.get("exact_reach", {})
    all_above, all_reach = taken.get("all_above", {}), taken.get("all_reach", {})
    tied: dict[int, int] = {}
    if shape.shared and consecutive:
        above_row: _Row | None = None
        for r in in_order:
            if above_row is None:
                tied[r.pk] = taken["tied"][r.key]
            elif above_row.key[: shape.shared] == r.key[: shape.shared]:
                tied[r.pk] = tied[above_row.pk] + 1
            else:
                tied[r.pk] = 0
            above_row = r
    elif shape.shared:
        tied = {r.pk: taken["tied"][r.key] for r in ranked}
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
            return _in_memory(_light_rows(shape, board, None), wanted, shape.shared)
    if wanted is not None and len(wanted) <= COUNTED_ROWS_MAX:
        if not wanted:
            return {}
        light = [_loaded(shape, row) for row in rows]
        if len(light) != len(wanted) or any(r is None for r in light):
            light = list(_light_rows(shape, board, wanted))
        return _counted(
            shape, board, [r for r in light if r is not None], first_position, board_size
        )
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
        key = tuple(_get(shape, row, name) for name in shape.board)
        boards.setdefault(key, []).append(row)
    if len(boards) > 1:
        first_position = None  # several boards: each counts its own places
        board_size = None
    for key, members in boards.items():
        marks = board_marks(
            shape,
            dict(zip(shape.board, key, strict=True)),
            map(_pk, members),
            rows=members,
            first_position=first_position,
            board_size=board_size,
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
    # model's own ordering. The board's columns lead although one board's rows share them,
    # as its order index does: a query over several boards reads it in order too.
    return [_attribute(shape, _key_name(name)) for name in (*shape.board, *shape.order)]


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
