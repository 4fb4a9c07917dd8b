"""What the board property tests read: every row's marks, counted and in memory."""

from __future__ import annotations

from typing import Any

from benchmarks_app.selectors.board_marks import COUNTED_ROWS_MAX, BoardShape, Marks, board_marks


def read_marks(shape: BoardShape, board: dict[str, Any]) -> dict[int, Marks]:
    """Every row's marks, computed in memory from the whole board and counted on its indexes
    (row by row, every other row, all rows at once): the ways must agree."""
    whole = board_marks(shape, board)
    pks = sorted(whole)
    assert len(pks) <= COUNTED_ROWS_MAX
    for pk in pks:
        assert board_marks(shape, board, [pk]) == {pk: whole[pk]}
    assert board_marks(shape, board, pks[::2]) == {pk: whole[pk] for pk in pks[::2]}
    assert board_marks(shape, board, pks) == whole
    return whole
