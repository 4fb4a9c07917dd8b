"""The marks of a page of board rows counted on the board's indexes, in one statement
(:func:`counted_marks`; see :mod:`~benchmarks_app.selectors.board_marks` for the definitions and
for when a board is ranked in memory instead). Counts of rows beyond a span, a value or an order
key are taken over the board's stored buckets (``models.board_sizes.BoardBucket``, kept by
triggers, read by :mod:`~benchmarks_app.selectors.board_bucket_sums`) and an index range within
the threshold's own bucket (issue 38).

This module is one concern, kept whole: the statement that counts a page's marks, built by
``_Counts`` (what each threshold needs: slices, ranges, buckets) and read back by
:func:`counted_marks`; split, either half would only make sense beside the other."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

import numpy as np
from django.db import connection

from benchmarks_app.models import BoardBucket
from benchmarks_app.models.board_sizes import SIZED_BOARDS, Measure, bucket_edges, bucket_of
from benchmarks_app.selectors.board_bucket_sums import StoredBuckets, listed_counts, segment_sums
from benchmarks_app.selectors.board_shapes import (
    BoardShape,
    LightRow,
    Marks,
    column_sql,
    compare_sql,
    where_board,
)

_COMPLEMENT = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _row_compare(columns: Sequence[str], op: str, values: Sequence[str]) -> str:
    if len(columns) == 1:
        return f"{columns[0]} {op} {values[0]}"
    return f"({', '.join(columns)}) {op} ({', '.join(values)})"


def _db_type(shape: BoardShape, name: str) -> str:
    field = shape.model._meta.pk if name in ("id", "pk") else shape.model._meta.get_field(name)
    return str(field.db_type(connection))  # type: ignore[union-attr]


def _as_text(value: Any) -> str | None:
    """A threshold as PostgreSQL's text input for its column's type (cast in the count)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float):
        return repr(float(value))  # numpy's floats too, without numpy's repr
    return str(value)


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
        self.base, self.base_params = where_board(shape, board)
        self.selects: list[str] = []
        self.params: list[Any] = []
        self.requests: dict[str, list[tuple[Any, ...]]] = {}
        # Requests whose counts are taken as they are (each its own), not summed slices.
        self.plain: set[str] = set()
        # Where each select's result goes: None, one count of the flat list; "array",
        # counts of the flat list; (request, slice indexes), counts of those slices;
        # ("rows", request) and ("sum", request), the stored buckets it reads.
        self.kinds: list[str | tuple[str, Any] | None] = []
        # Requests counted over the stored buckets: their measure code and comparison.
        self.bucketed: dict[str, tuple[int, str]] = {}
        # Requests whose counts are summed within segments (the indexes where each starts).
        self.segments: dict[str, list[int]] = {}
        self.sized = SIZED_BOARDS.get(shape.model._meta.db_table)

    def _select(self, sql: str, params: Sequence[Any], kind: Any = None) -> None:
        self.selects.append(sql)
        self.params += params
        self.kinds.append(kind)

    def measure(self, name: str, *, exact_only: bool = False) -> Measure | None:
        """The stored buckets' measure of column ``name`` (None: the board has none)."""
        return None if self.sized is None else self.sized.measure(name, exact_only=exact_only)

    def order_measure(self, names: Sequence[str]) -> Measure | None:
        """The stored buckets' measure of the board's whole order ``names`` (None: none)."""
        if self.sized is None or tuple(names) != tuple(self.shape.order):
            return None
        return self.sized.order_measure(tuple(names))

    def ask(
        self,
        request: str,
        names: Sequence[str],
        op: str,
        thresholds: Iterable[tuple[Any, ...]],
        where: str = "",
        *,
        exact_only: bool = False,
    ) -> None:
        """Ask for counts, by the name ``request`` in what :meth:`take` returns. ``where``:
        a condition on the rows counted; ``exact_only`` says it is the exact rows'."""
        ordered = sorted(set(thresholds), reverse=op in (">", ">="))
        columns = [column_sql(self.shape, name) for name in names]
        base = f"{self.base} AND {where}" if where else self.base
        measure = self.measure(names[0], exact_only=exact_only) if len(names) == 1 else None
        if measure is not None and all(t[0] is not None for t in ordered):
            self._ask_bucketed(request, names[0], op, ordered, base, measure)
            return
        order = self.order_measure(names) if op == "<" and not where else None
        if order is not None:
            self._ask_order_bucketed(request, names, ordered, order)
            return
        self.requests[request] = ordered
        if len(names) > 1 and ordered:
            self._ask_ranges(request, names, op, ordered, base)
            return
        if len(ordered) > 2:
            self._ask_listed(names, op, ordered, base)
            return
        previous: tuple[Any, ...] | None = None
        for threshold in ordered:
            sql, values = compare_sql(columns, op, threshold)
            condition, params = f"{base} AND {sql}", [*self.base_params, *values]
            if previous is not None:
                since, since_params = compare_sql(columns, _COMPLEMENT[op], previous)
                condition += f" AND {since}"
                params += since_params
            self._select(f"(SELECT COUNT(*) FROM {self.table} WHERE {condition})", params)
            previous = threshold

    def _ask_bucketed(
        self,
        request: str,
        name: str,
        op: str,
        ordered: list[tuple[Any, ...]],
        base: str,
        measure: Measure,
    ) -> None:
        # The rows beyond a threshold are the buckets beyond its bucket (summed from the
        # stored buckets in :meth:`take`) and the rows of its own bucket beyond it: an index
        # range within one bucket, whatever the thresholds' spread (scattered thresholds, a
        # page sorted by a column, counted a pass over the whole index in slices).
        self.requests[request] = ordered
        self.plain.add(request)
        self.bucketed[request] = (measure.code, op)
        if not ordered:
            return
        upward = op in (">", ">=")
        rows = []
        for i, (threshold,) in enumerate(ordered):
            low, high = bucket_edges(bucket_of(threshold))
            rows.append((i, threshold, high if upward else low))
        column = column_sql(self.shape, name)
        given, edge_at = self._cast([name], 2)[0], self._cast([name], 3)[0]
        count = (
            f"SELECT COUNT(*) FROM {self.table} WHERE {base} AND {column} {op} {given} "
            f"AND {column} {'<' if upward else '>='} {edge_at}"
        )
        self._select(*self._listed(count, rows, 1), kind="array")

    def _ask_order_bucketed(
        self,
        request: str,
        names: Sequence[str],
        ordered: list[tuple[Any, ...]],
        measure: Measure,
    ) -> None:
        # The rows before a key in the board's order: the buckets before the key's (its
        # groups, then its first number's bucket; summed in :meth:`take`), and the rows of
        # its own bucket before it. The keys of one bucket are counted as slices (the first
        # from the bucket's start, each next one from the key before), so that a bucket's
        # rows are counted once however many keys fall in it (a bucket of 10,000 unranked
        # rows of equal numbers). Scattered keys (a page sorted by another column) counted a
        # pass over the board's order index in slices from its first row.
        self.requests[request] = ordered
        self.plain.add(request)
        self.bucketed[request] = (measure.code, "<")
        if not ordered:
            return
        keys = self._bucket_keys(measure.code, ordered)
        heads = [i for i in range(len(ordered)) if i == 0 or keys[i] != keys[i - 1]]
        self.segments[request] = heads
        steps = set(range(len(ordered))) - set(heads)
        if steps:
            self._ask_ranges(request, names, "<", ordered, self.base, only=steps)
        # A bucket's first key: the rows of the bucket before it, as index ranges each
        # bounded on one column behind equalities (the groups equal, the number from the
        # bucket's start up to the key's, then the key's columns one by one).
        width = len(measure.groups)
        columns = [column_sql(self.shape, name) for name in names]
        low_at = self._cast([measure.column], 2)[0]
        key_at = self._cast(names, 3)
        same = [f"{columns[k]} = {key_at[k]}" for k in range(width)]
        pieces = [[*same, f"{columns[width]} >= {low_at}", f"{columns[width]} < {key_at[width]}"]]
        for j in range(width + 1, len(names)):
            equal = [f"{columns[k]} = {key_at[k]}" for k in range(width, j)]
            pieces.append([*same, *equal, f"{columns[j]} < {key_at[j]}"])
        count = " + ".join(
            f"(SELECT COUNT(*) FROM {self.table} WHERE {self.base} AND {' AND '.join(piece)})"
            for piece in pieces
        )
        rows = []
        for i in heads:
            rows.append((i, bucket_edges(keys[i][2])[0], *ordered[i]))
        sql, params = self._listed(count, rows, len(pieces))
        self._select(sql, params, kind=(request, heads))

    def _bucket_keys(
        self, code: int, ordered: Sequence[tuple[Any, ...]]
    ) -> list[tuple[int, int, int]]:
        """The stored bucket (group_a, group_b, bucket) each threshold of measure ``code``
        falls in."""
        assert self.sized is not None
        (measure,) = [m for m in self.sized.measures if m.code == code]
        width = len(measure.groups)
        out = []
        for threshold in ordered:
            groups = [int(g) for g in threshold[:width]] + [0, 0]
            out.append((groups[0], groups[1], bucket_of(threshold[width])))
        return out

    def _ask_stored_buckets(self) -> None:
        """For each bucketed request, the stored buckets between its first and last
        thresholds' buckets (a page's thresholds are close together unless it is sorted by
        another column) and the sum of those beyond them: two selects, never the whole
        summary of a board whose page sits at one end."""
        assert self.sized is not None
        table = connection.ops.quote_name(BoardBucket._meta.db_table)
        if connection.vendor == "postgresql":
            gathered = "array_agg(ARRAY[group_a, group_b, bucket, entries])"
        else:
            gathered = "json_group_array(json_array(group_a, group_b, bucket, entries))"
        key_b = self.base_params[1] if len(self.base_params) == 3 else ""
        board = "board = %s AND key_a = %s AND key_b = %s AND phase_key = %s AND measure = %s"
        key = "(group_a, group_b, bucket)"
        for request, (code, op) in self.bucketed.items():
            wanted = self._bucket_keys(code, self.requests[request])
            if not wanted:
                continue
            low, high = list(min(wanted)), list(max(wanted))
            params = [self.sized.board, self.base_params[0], key_b, self.base_params[-1], code]
            if op in (">", ">="):
                between, beyond = f"{key} > (%s, %s, %s) AND {key} <= (%s, %s, %s)", high
                beyond_sql = f"{key} > (%s, %s, %s)"
            else:
                between, beyond = f"{key} >= (%s, %s, %s) AND {key} < (%s, %s, %s)", low
                beyond_sql = f"{key} < (%s, %s, %s)"
            self._select(
                f"(SELECT {gathered} FROM {table} WHERE {board} AND {between})",
                [*params, *low, *high],
                kind=("rows", request),
            )
            self._select(
                f"(SELECT COALESCE(SUM(entries), 0) FROM {table} WHERE {board} AND {beyond_sql})",
                [*params, *beyond],
                kind=("sum", request),
            )

    def _listed(
        self, count: str, rows: Sequence[Sequence[Any]], base_uses: int
    ) -> tuple[str, list[Any]]:
        """``count`` (SQL reading the listed row as ``v.column2``...) for each of ``rows``
        (their first value: the order of the array), as one array (on SQLite, a JSON array
        of [order, count] pairs, which :meth:`take` sorts). The rows are a VALUES list on
        SQLite and arrays unnested on PostgreSQL."""
        base_params = [*self.base_params * base_uses]
        if connection.vendor == "postgresql":
            # One array a column, unnested into the rows (the counts cast v.column2... to the
            # board's types): the statement no longer grows with the rows. A sorted audit
            # page's VALUES list made a 36 KB statement of thousands of parameters, which
            # psycopg turned into a query anew on every request (it caches statements under
            # 4 KB only): about a tenth of the page's CPU at 100,000 entries.
            width = len(rows[0])
            arrays = ", ".join(["%s::bigint[]", *["%s::text[]"] * (width - 1)])
            names = ", ".join(f"column{k + 1}" for k in range(width))
            sql = (
                f"(SELECT array_agg(({count}) ORDER BY v.column1) "
                f"FROM unnest({arrays}) AS v({names}))"
            )
            order = [int(row[0]) for row in rows]
            bounds = [[_as_text(row[k]) for row in rows] for k in range(1, width)]
            return sql, [*base_params, order, *bounds]
        values = ", ".join([f"({', '.join(['%s'] * len(rows[0]))})"] * len(rows))
        gathered = f"json_group_array(json_array(v.column1, ({count})))"
        sql = f"(SELECT {gathered} FROM (VALUES {values}) AS v)"
        return sql, [*base_params, *(value for row in rows for value in row)]

    def _cast(self, names: Sequence[str], first: int) -> list[str]:
        return [
            f"CAST(v.column{first + k} AS {_db_type(self.shape, name)})"
            for k, name in enumerate(names)
        ]

    def _ask_listed(
        self, names: Sequence[str], op: str, ordered: list[tuple[Any, ...]], base: str
    ) -> None:
        # The first slice has no lower bound: a subquery of its own.
        columns = [column_sql(self.shape, name) for name in names]
        first, first_params = compare_sql(columns, op, ordered[0])
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
        only: set[int] | None = None,
    ) -> None:
        # ``only``: the slices to count (by index; None: all).
        # The slice [low, high) of the order (low None: from the board's first row), with p
        # the columns low and high share: those p equal, then low's row (column p equal,
        # the rest at least low's), the rows strictly between on column p, and high's side
        # (column p equal to high's, then for each later column j: the columns before it
        # equal to high's and column j below). Each is an index range bounded on its first
        # unequal column. Slices with the same p share their SQL: one subquery per p.
        assert op == "<", "rows before keys"
        columns = [column_sql(self.shape, name) for name in names]
        width = len(names)
        by_shared: dict[int, list[int]] = {}
        for i, high in enumerate(ordered):
            if only is not None and i not in only:
                continue
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
        columns = [column_sql(self.shape, name) for name in names]
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
            rest, values = compare_sql(columns[equal:], "<", key[equal:])
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
            f"AND {column_sql(self.shape, name)} IS NULL)",
            self.base_params,
        )

    def take(self) -> dict[str, dict[tuple[Any, ...], int]]:
        """Every request's counts by threshold, in one statement: a request of more than two
        thresholds is one subquery over a VALUES list, so a statement holds a few subqueries
        (SQLite allows 2,000 result columns; a sorted 500-row audit page, the widest, binds
        12,820 of its 32,766 parameters)."""
        results: list[Any] = []
        if self.bucketed:
            self._ask_stored_buckets()
        if self.selects:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT {', '.join(self.selects)}", self.params)
                results = list(cursor.fetchone())
        flat: list[int] = []
        scattered: dict[str, np.ndarray] = {}
        stored: dict[str, StoredBuckets] = {}
        for kind, result in zip(self.kinds, results, strict=True):
            if kind is None:
                flat.append(result)
            elif isinstance(kind, tuple) and kind[0] == "rows":
                stored.setdefault(kind[1], StoredBuckets()).add_rows(result)
            elif isinstance(kind, tuple) and kind[0] == "sum":
                stored.setdefault(kind[1], StoredBuckets()).beyond_all = int(result)
            elif isinstance(kind, str):  # "array"
                flat += listed_counts(result)
            else:
                request, slices = kind
                counts = scattered.setdefault(
                    request, np.zeros(len(self.requests[request]), dtype=np.int64)
                )
                counts[slices] += np.asarray(listed_counts(result), dtype=np.int64)
        out, start = {}, 0
        for request, ordered in self.requests.items():
            if request in scattered:
                part = scattered[request]
            else:
                part = np.asarray(flat[start : start + len(ordered)], dtype=np.int64)
                start += len(ordered)
            if request not in self.plain:
                part = np.cumsum(part)
            if request in self.segments:
                part = segment_sums(part, self.segments[request])
            if request in self.bucketed and ordered:
                code, op = self.bucketed[request]
                part = part + stored[request].beyond(op, self._bucket_keys(code, ordered))
            out[request] = {t: int(n) for t, n in zip(ordered, part.tolist(), strict=True)}
        return out


def _key(row: LightRow) -> tuple[Any, ...]:
    return row.key


def counted_marks(
    shape: BoardShape,
    board: Mapping[str, Any],
    rows: list[LightRow],
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
        if not from_end or not thresholds or counts.measure(name) is not None:
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
        exact = f"{column_sql(shape, 'exact')} = {true}"
        values = [(r.value,) for r in loose]
        points = [(r.value,) for r in ranked if r.exact]
        counts.ask("exact_above", [shape.value], ">", values, where=exact, exact_only=True)
        counts.ask("exact_reach", [shape.value], ">=", values, where=exact, exact_only=True)
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
        above_row: LightRow | None = None
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
