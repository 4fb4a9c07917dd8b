"""Statistics shared by the boards: bootstrap intervals and the rank ranges they imply."""

from __future__ import annotations

from scoring.stats.bootstrap import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    MIN_RESAMPLES,
    BoardRank,
    Interval,
    board_ranks,
    bootstrap_distribution,
    bootstrap_interval,
    bootstrap_ratio_interval,
    bootstrap_sums_interval,
    rank_ranges,
    tied_with_above,
)

__all__ = [
    "DEFAULT_LEVEL",
    "DEFAULT_RESAMPLES",
    "MIN_RESAMPLES",
    "BoardRank",
    "Interval",
    "board_ranks",
    "bootstrap_distribution",
    "bootstrap_interval",
    "bootstrap_ratio_interval",
    "bootstrap_sums_interval",
    "rank_ranges",
    "tied_with_above",
]
