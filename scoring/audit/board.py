"""An audit board: its ranking metric's bootstrap interval, ranks, rank ranges and ties.

The ranking metric is F1 with partial matches (``f1_with_partial``), summed over the repos of
a dataset release (see :mod:`scoring.audit.metrics`). Its 95% interval is a percentile
bootstrap over the release's **truth findings** (:mod:`scoring.stats.bootstrap`):

* each truth finding is a unit carrying its outcome: 1 when it was matched or partially
  matched (TP + partial), 0 when missed;
* the scanner's reported non-QA findings of a repo (the denominator of precision with
  partial) are shared equally among that repo's truth findings, so a resample that draws a
  repo's findings twice also counts its false positives twice. A repo without any truth
  finding has no unit; its reported findings stay in the denominator as a constant;
* on every resample, P+ = hits / reported share, R+ = hits / units, F1+ = 2·P+·R+ / (P+ + R+),
  exactly as :func:`scoring.audit.metrics.with_ratios` computes them, so the full sample gives
  the board's own number.

Only the outcomes matter to the interval, not which truth finding had which, so the units are
built from each repo's counts. Two scanners with the same counts get the same units in the
same order and, with the same seed, the same interval.

Rows are ranked on (F1+, F1), best first; rows with identical numbers share a rank (1, 1, 3).
:func:`scoring.stats.bootstrap.rank_ranges` gives the ranks each row could take given the
intervals, and :func:`~scoring.stats.bootstrap.tied_with_above` marks rows whose interval
overlaps the row above as statistically tied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from scoring.stats.bootstrap import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    Interval,
    bootstrap_sums_interval,
    span_rank_ranges,
    span_ties,
    widen_spans,
)

BOARD_RESAMPLES = DEFAULT_RESAMPLES
BOARD_LEVEL = DEFAULT_LEVEL
BOARD_SEED = 0
# Numbers equal to this many digits are the same number (sums of floats may differ in the
# last bits while the counts are identical).
RANK_DIGITS = 12


@dataclass(frozen=True)
class Units:
    """Truth findings as bootstrap units: one row ``[hit, reported share]`` per finding."""

    matrix: npt.NDArray[np.float64]
    # Reported non-QA findings of repos without truth findings (not resampled).
    fixed_reported: float = 0.0

    def __len__(self) -> int:
        return int(self.matrix.shape[0])


def truth_units(repo_rows: Sequence[Mapping[str, Any]]) -> Units:
    """The units of complete repo metrics rows (``truth``, ``scan``, ``qa``, ``tp``, ``partial``).

    Ordered by repo, then hits before misses, so that equal counts give equal units.
    """
    rows: list[list[float]] = []
    fixed = 0.0
    for row in sorted(repo_rows, key=lambda r: str(r.get("repo", ""))):
        truth = int(row.get("truth") or 0)
        reported = int(row.get("scan") or 0) - int(row.get("qa") or 0)
        hits = int(row.get("tp") or 0) + int(row.get("partial") or 0)
        if truth <= 0:
            fixed += reported
            continue
        share = reported / truth
        hits = max(0, min(hits, truth))
        rows += [[1.0, share]] * hits + [[0.0, share]] * (truth - hits)
    matrix = np.asarray(rows, dtype=np.float64).reshape(len(rows), 2)
    return Units(matrix=matrix, fixed_reported=fixed)


def f1_with_partial_of_sums(
    sums: npt.NDArray[np.float64], *, units: int, fixed_reported: float = 0.0
) -> npt.NDArray[np.float64]:
    """F1+ for each row of ``[hits, reported]`` sums over ``units`` truth findings."""
    hits = sums[:, 0]
    reported = sums[:, 1] + fixed_reported
    precision = np.zeros_like(hits)
    np.divide(hits, reported, out=precision, where=reported != 0)
    recall = hits / units if units else np.zeros_like(hits)
    total = precision + recall
    f1 = np.zeros_like(hits)
    np.divide(2 * precision * recall, total, out=f1, where=total != 0)
    return f1


def f1_with_partial_statistic(units: Units) -> Any:
    """The same statistic for :func:`scoring.stats.bootstrap.bootstrap_interval` (lists of
    unit rows), for checking the vectorised path against the plain one."""

    def statistic(sample: Sequence[Sequence[float]]) -> float:
        sums = np.asarray([[sum(u[0] for u in sample), sum(u[1] for u in sample)]])
        return float(
            f1_with_partial_of_sums(sums, units=len(sample), fixed_reported=units.fixed_reported)[0]
        )

    return statistic


def f1_with_partial_interval(
    repo_rows: Sequence[Mapping[str, Any]],
    *,
    resamples: int = BOARD_RESAMPLES,
    level: float = BOARD_LEVEL,
    seed: int = BOARD_SEED,
) -> Interval | None:
    """The bootstrap interval of F1+ over the truth findings of ``repo_rows``; None without
    truth findings."""
    units = truth_units(repo_rows)
    if not len(units):
        return None
    n = len(units)
    return bootstrap_sums_interval(
        units.matrix,
        lambda sums: f1_with_partial_of_sums(sums, units=n, fixed_reported=units.fixed_reported),
        resamples=resamples,
        level=level,
        seed=seed,
    )


@dataclass
class BoardEntry:
    """One scanner on a board, before ranking."""

    scanner: str
    complete: bool
    repos_evaluated: int
    f1_with_partial: float | None
    f1: float | None
    ci: tuple[float, float] | None = None
    rank: int | None = None
    rank_low: int | None = None
    rank_high: int | None = None
    tied_with_above: bool = False


def _number(value: float | None) -> float:
    return round(value, RANK_DIGITS) if value is not None else float("-inf")


def _score(entry: BoardEntry) -> tuple[float, float]:
    return (_number(entry.f1_with_partial), _number(entry.f1))


def _numbers(values: Sequence[float | None]) -> npt.NDArray[np.float64]:
    """``_number`` of each value, vectorised and identical to it.

    numpy rounds by scaling: ``rint(x * 10**d) / 10**d``. The division is correctly rounded,
    like Python's ``round``, so the two differ only where the scaled product was rounded
    across a half (x * 10**d within a hair of k + 1/2): those few values, and any too large
    for the product to be exact, are rounded by Python.
    """
    raw = _floats(values, np.nan)
    scale = 10.0**RANK_DIGITS
    scaled = raw * scale
    out = np.rint(scaled) / scale
    doubtful = np.flatnonzero(
        (np.abs(np.abs(scaled - np.floor(scaled)) - 0.5) < 1e-3) | (np.abs(raw) > 1e3)
    )
    for i in doubtful.tolist():
        out[i] = round(float(raw[i]), RANK_DIGITS)
    out[np.isnan(raw)] = float("-inf")
    return out


@dataclass(frozen=True)
class BoardOrder:
    """A board's order and marks, as arrays over the rows given to :func:`order_board`.

    ``order`` lists the rows' indices in board order (ranked rows best first, then the
    incomplete ones). ``rank``, ``rank_low`` and ``rank_high`` are 0 for unranked rows.
    """

    order: npt.NDArray[np.int64]
    rank: npt.NDArray[np.int64]
    rank_low: npt.NDArray[np.int64]
    rank_high: npt.NDArray[np.int64]
    tied_with_above: npt.NDArray[np.bool_]


def _floats(values: Sequence[float | None], missing: float) -> npt.NDArray[np.float64]:
    return np.asarray([missing if v is None else v for v in values], dtype=np.float64)


def board_spans(
    f1_with_partial: Sequence[float | None],
    ci_low: Sequence[float | None],
    ci_high: Sequence[float | None],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The spans ranked rows' rank ranges and ties are computed from: each row's interval
    (its value, 0 when missing, where it has none) widened to contain its value."""
    values = _floats([v or 0.0 for v in f1_with_partial], 0.0)
    has_ci = np.asarray(
        [lo is not None and hi is not None for lo, hi in zip(ci_low, ci_high, strict=True)],
        dtype=np.bool_,
    ).reshape(len(values))
    lows = np.where(has_ci, _floats(ci_low, 0.0), values)
    highs = np.where(has_ci, _floats(ci_high, 0.0), values)
    return widen_spans(values, lows, highs)


def order_board(
    *,
    names: Sequence[str],
    complete: Sequence[bool],
    repos_evaluated: Sequence[int],
    f1_with_partial: Sequence[float | None],
    f1: Sequence[float | None],
    ci_low: Sequence[float | None],
    ci_high: Sequence[float | None],
) -> BoardOrder:
    """The whole board's order, ranks, rank ranges and ties, vectorised (O(n log n)).

    The one definition of a board's order: :func:`rank_board` is this on entries, and a run's
    end re-ranks its board's stored rows with it (100,000 rows in milliseconds).
    """
    n = len(names)
    s0, s1 = _numbers(f1_with_partial), _numbers(f1)
    labels = np.asarray(names, dtype=np.str_) if n else np.zeros(0, dtype=np.str_)
    done = np.asarray(complete, dtype=np.bool_).reshape(n)
    repos = np.asarray(repos_evaluated, dtype=np.int64).reshape(n)
    ranked = np.flatnonzero(done)
    ranked = ranked[np.lexsort((labels[ranked], -s1[ranked], -s0[ranked]))]
    unranked = np.flatnonzero(~done)
    unranked = unranked[
        np.lexsort((labels[unranked], -s1[unranked], -s0[unranked], -repos[unranked]))
    ]
    rank = np.zeros(n, dtype=np.int64)
    rank_low = np.zeros(n, dtype=np.int64)
    rank_high = np.zeros(n, dtype=np.int64)
    tied = np.zeros(n, dtype=np.bool_)
    if len(ranked):
        a, b = s0[ranked], s1[ranked]
        # Rows with identical numbers share the rank of the first of them (1, 1, 3).
        starts = np.ones(len(ranked), dtype=np.bool_)
        starts[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
        places = np.arange(1, len(ranked) + 1, dtype=np.int64)
        rank[ranked] = np.maximum.accumulate(np.where(starts, places, 0))
        lows, highs = board_spans(
            [f1_with_partial[i] for i in ranked.tolist()],
            [ci_low[i] for i in ranked.tolist()],
            [ci_high[i] for i in ranked.tolist()],
        )
        best, worst = span_rank_ranges(lows, highs)
        rank_low[ranked], rank_high[ranked] = best, worst
        tied[ranked] = span_ties(lows, highs)
    return BoardOrder(
        order=np.concatenate([ranked, unranked]).astype(np.int64),
        rank=rank,
        rank_low=rank_low,
        rank_high=rank_high,
        tied_with_above=tied,
    )


def rank_board(entries: Sequence[BoardEntry]) -> list[BoardEntry]:
    """The board's order, ranks filled in: complete rows ranked best first, then incomplete
    rows (most repos evaluated first), unranked."""
    marks = order_board(
        names=[e.scanner for e in entries],
        complete=[e.complete for e in entries],
        repos_evaluated=[e.repos_evaluated for e in entries],
        f1_with_partial=[e.f1_with_partial for e in entries],
        f1=[e.f1 for e in entries],
        ci_low=[e.ci[0] if e.ci is not None else None for e in entries],
        ci_high=[e.ci[1] if e.ci is not None else None for e in entries],
    )
    out = []
    for i in marks.order.tolist():
        entry = entries[i]
        if entry.complete:
            entry.rank = int(marks.rank[i])
            entry.rank_low = int(marks.rank_low[i])
            entry.rank_high = int(marks.rank_high[i])
            entry.tied_with_above = bool(marks.tied_with_above[i])
        else:
            entry.rank = entry.rank_low = entry.rank_high = None
            entry.tied_with_above = False
        out.append(entry)
    return out
