"""Writing a board's new places and marks after one entry changed: only the rows that move.

Every board stores, per row, its place and marks (``position``, ``rank``, ``rank_low``,
``rank_high``, the tie flag). When one entry changes, the caller computes every row's new
marks from the stored rows (with the same code as a full rebuild) and passes old and new;
this module writes the difference. A new or improved entry shifts the places and ranks of the
rows it passes and the rank ranges of the rows its interval moves across: each such set is a
range of the rows' place or span, written as ``mark = mark + d`` over that range in one UPDATE
(a few ranges, whatever the board's size). Whatever is not such a range (a key shared with an
unchanged row, a mark appearing or vanishing, a changed tie flag, the changed entry itself) is
written row by row with its new values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from django.db.models import Case, ExpressionWrapper, F, IntegerField, Model, Q, QuerySet, When
from django.db.models.lookups import GreaterThanOrEqual, LessThanOrEqual
from django.utils import timezone

from scoring.stats.bootstrap import BoardRank

# Beyond this many ranges per mark, its changed rows are written one by one.
MAX_RUNS = 32


def stored_marks(
    rows: Sequence[Sequence[Any]], *, first_column: int, marks: Sequence[str]
) -> dict[str, npt.NDArray[np.int64]]:
    """Each of ``marks`` as stored, per row: the columns from ``first_column`` of ``rows``, in
    the order of ``marks`` (a missing mark read as 0, as :func:`marks_write` compares them)."""
    return {
        mark: np.asarray(
            [0 if r[first_column + i] is None else int(r[first_column + i]) for r in rows],
            dtype=np.int64,
        )
        for i, mark in enumerate(marks)
    }


def ranked_marks(
    order: npt.NDArray[np.int64], ranks: Sequence[BoardRank]
) -> dict[str, npt.NDArray[np.int64]]:
    """Every row's new place and marks (``position``, ``rank``, ``rank_low``, ``rank_high``,
    ``tied``) from ``board_ranks`` over the rows taken in ``order`` (the place is the rank)."""
    n = len(order)
    position, low, high, tied = (np.zeros(n, dtype=np.int64) for _ in range(4))
    position[order] = np.arange(1, n + 1, dtype=np.int64)
    low[order] = [m.rank_low or 0 for m in ranks]
    high[order] = [m.rank_high or 0 for m in ranks]
    tied[order] = [int(m.tied) for m in ranks]
    return {
        "position": position,
        "rank": position,
        "rank_low": low,
        "rank_high": high,
        "tied": tied,
    }


@dataclass(frozen=True)
class MarkPlan:
    """How one mark's changes are found as ranges: over ``rows`` (a mask), by ``keys`` (one per
    row), which SQL computes as ``key_sql`` on rows matching ``domain_sql``."""

    mark: str
    rows: npt.NDArray[np.bool_]
    keys: npt.NDArray[Any]
    key_sql: Any
    domain_sql: Q | None = None


def _runs(
    keys: npt.NDArray[Any], delta: npt.NDArray[np.int64]
) -> tuple[list[tuple[Any, Any, int]], npt.NDArray[np.int64]]:
    """Rows whose mark moves by ``delta`` as ranges of ``keys``: ``(low key, high key,
    delta)`` covering exactly the rows of one delta (no other row has a key within), and the
    indices of the changed rows no such range covers."""
    order = np.argsort(keys, kind="stable")
    k, d = keys[order], delta[order]
    if not len(k):
        return [], np.zeros(0, dtype=np.int64)
    cuts = np.flatnonzero(d[1:] != d[:-1]) + 1
    starts, ends = np.r_[0, cuts], np.r_[cuts, len(k)]
    moved = d[starts] != 0
    if moved.sum() > MAX_RUNS:
        return [], order[d != 0]
    runs, loose = [], []
    for start, end in zip(starts[moved].tolist(), ends[moved].tolist(), strict=True):
        low, high = k[start], k[end - 1]
        if (start and k[start - 1] >= low) or (end < len(k) and k[end] <= high):
            loose.append(order[start:end])  # a key shared with an unchanged row
        else:
            runs.append((low.item(), high.item(), int(d[start])))
    return runs, (np.concatenate(loose) if loose else np.zeros(0, dtype=np.int64))


def marks_write(
    board: QuerySet[Any],
    *,
    ids: npt.NDArray[np.int64],
    old: dict[str, npt.NDArray[np.int64]],
    new: dict[str, npt.NDArray[np.int64]],
    plans: list[MarkPlan],
    entrant: int | None,
) -> int:
    """Write ``new`` marks (0: none) over ``old`` ones for the rows ``ids`` of ``board``;
    ``entrant`` (a row id) is written whole. Returns the number of rows whose marks changed
    (the entrant included)."""
    model: type[Model] = board.model
    marks = list(new)
    others = ids != (entrant if entrant is not None else -1)
    loose = [np.flatnonzero(~others)]
    for mark in marks:
        # A mark appearing or vanishing (NULL) cannot be shifted.
        loose.append(np.flatnonzero((old[mark] == 0) != (new[mark] == 0)))
    planned = {plan.mark for plan in plans}
    for mark in marks:
        if mark not in planned:
            loose.append(np.flatnonzero(new[mark] != old[mark]))
    cases: dict[str, list[When]] = {}
    where = Q(pk__in=[])
    for plan in plans:
        within = np.flatnonzero(plan.rows & others)
        delta = (new[plan.mark] - old[plan.mark])[within]
        # Rows already written whole need no range.
        delta[(old[plan.mark][within] == 0) | (new[plan.mark][within] == 0)] = 0
        runs, left = _runs(plan.keys[within], delta)
        loose.append(within[left])
        for low, high, step in runs:
            condition = Q(
                GreaterThanOrEqual(plan.key_sql, low), LessThanOrEqual(plan.key_sql, high)
            )
            if plan.domain_sql is not None:
                condition &= plan.domain_sql
            moved = ExpressionWrapper(F(plan.mark) + step, output_field=IntegerField())
            cases.setdefault(plan.mark, []).append(When(condition, then=moved))
            where |= condition
    now = timezone.now()
    if cases:
        # One statement: every CASE reads the rows' marks as they were.
        rest = board.exclude(pk=entrant) if entrant is not None else board
        rest.filter(where).update(
            computed_at=now,
            **{
                mark: Case(*whens, default=F(mark), output_field=IntegerField())
                for mark, whens in cases.items()
            },
        )
    explicit = np.unique(np.concatenate(loose))
    if len(explicit):
        booleans = {
            f.name for f in model._meta.concrete_fields if f.get_internal_type() == "BooleanField"
        }

        def value(mark: str, i: int) -> Any:
            number = int(new[mark][i])
            if mark in booleans:
                return bool(number)
            return number if number or mark == "position" else None

        rows = [
            model(pk=int(ids[i]), computed_at=now, **{m: value(m, i) for m in marks})
            for i in explicit.tolist()
        ]
        model.objects.bulk_update(rows, [*marks, "computed_at"], batch_size=500)  # type: ignore[attr-defined]
    moved_rows = np.zeros(len(ids), dtype=np.bool_)
    for mark in marks:
        moved_rows |= new[mark] != old[mark]
    return int((moved_rows | ~others).sum())
