"""What the board property tests read: every row's marks, counted and in memory."""

from __future__ import annotations

from typing import Any

from benchmarks_app.selectors.board_marks import (
    COUNTED_ROWS_MAX,
    BoardShape,
    Marks,
    board_marks,
    own_order,
)


def read_marks(shape: BoardShape, board: dict[str, Any]) -> dict[int, Marks]:
    """Every row's marks, computed in memory from the whole board and counted on its indexes
    (row by row, every other row, all rows at once, and pages of the board's order whose
    places are taken from their offsets, with and without the board's size): the ways must
    agree."""
    whole = board_marks(shape, board)
    pks = sorted(whole)
    assert len(pks) <= COUNTED_ROWS_MAX
    for pk in pks:
        assert board_marks(shape, board, [pk]) == {pk: whole[pk]}
    assert board_marks(shape, board, pks[::2]) == {pk: whole[pk] for pk in pks[::2]}
    assert board_marks(shape, board, pks) == whole
    in_order = list(
        shape.model._default_manager.filter(**board)
        .order_by(*own_order(shape))
        .values_list("pk", flat=True)
    )
    assert sorted(in_order) == pks
    for size in (1, 3):
        for start in range(0, len(in_order), size):
            page = in_order[start : start + size]
            # Given in reverse: the page's order comes from its rows' keys, not the argument's.
            found = board_marks(shape, board, page[::-1], first_position=start + 1)
            assert found == {pk: whole[pk] for pk in page}
            # With the board's size: pages in its lower half count from its end.
            sized = board_marks(
                shape, board, page, first_position=start + 1, board_size=len(in_order)
            )
            assert sized == {pk: whole[pk] for pk in page}
    return whole
