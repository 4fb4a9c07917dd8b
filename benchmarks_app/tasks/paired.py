"""Queue entry point of the paired marks (``services.paired``)."""

from __future__ import annotations

from benchmarks_app.selectors.paired import BoardKey
from benchmarks_app.services.paired import board_paired_refresh, paired_refresh_take


def refresh_paired_marks(board: str) -> str:
    """Recompute one board's paired marks, unless another worker already took the request."""
    if not paired_refresh_take(board=board):
        return f"{board}: already done"
    done = board_paired_refresh(board=BoardKey.parse(board))
    return f"{board}: {done.marked} row(s) marked, {done.split_pairs} tie(s) split"
