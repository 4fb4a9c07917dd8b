"""Writing one entrant's board row and the ties next to it (what a run's end changes).

A board row's place and ranks are counted when read (:mod:`benchmarks_app.selectors.board_marks`);
its tie with the row above is stored. When one row is written, moved or removed, only the
ties of the row where it now is, the row after it, and the row after where it was can change:
at most three rows, whatever the board's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Model

from benchmarks_app.selectors.board_marks import (
    BoardShape,
    board_filter,
    board_of,
    key_of,
    neighbour,
    tied_between,
)


def board_ties_update(
    *, shape: BoardShape, board: Mapping[str, Any], keys: Iterable[tuple[Any, ...] | None]
) -> set[int]:
    """Bring the stored ties up to date around the order keys ``keys`` (where a row was
    written, moved from, or deleted): the row at each key and the row after it. Returns the
    ids of the rows whose tie changed."""
    rows = shape.model._default_manager.filter(**board_filter(shape, board))
    seen: set[int] = set()
    changed: set[int] = set()
    for key in {k for k in keys if k is not None}:
        at = neighbour(shape, board, key, ">=")
        after = neighbour(shape, board, at.key, ">") if at is not None else None
        for row in (at, after):
            if row is None or row.pk in seen:
                continue
            seen.add(row.pk)
            tied = tied_between(neighbour(shape, board, row.key, "<"), row)
            if rows.filter(pk=row.pk).exclude(**{shape.tied: tied}).update(**{shape.tied: tied}):
                changed.add(row.pk)
    return changed


def board_row_save(*, shape: BoardShape, row: Model, old_key: tuple[Any, ...] | None) -> int:
    """Save an entrant's row (new, or its stored row rewritten: ``old_key`` its order key
    before) and the ties next to where it was and is; the number of rows written."""
    row.save()
    changed = board_ties_update(
        shape=shape, board=board_of(shape, row), keys=[old_key, key_of(shape, row)]
    )
    return len({row.pk} | changed)


def board_row_delete(*, shape: BoardShape, row: Model) -> int:
    """Delete an entrant's row (it has no entry left) and mend the ties where it was; the
    number of rows written."""
    board, old_key = board_of(shape, row), key_of(shape, row)
    row.delete()
    return 1 + len(board_ties_update(shape=shape, board=board, keys=[old_key]))
