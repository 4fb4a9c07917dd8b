"""Percentile bootstrap intervals for board metrics, and the rank ranges they imply.

Method: the units a metric is computed over (truth findings, probes, checklist questions) are
resampled with replacement, as many as there are, ``resamples`` times; the metric is computed on
each resample, and the interval is the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of
those values (numpy's default linear interpolation between order statistics). Resamples on
which the metric is undefined (a ratio over nothing) are left out. The draws come from
``numpy.random.default_rng(seed)``, so the same units, statistic, count and seed always give
the same interval.

``bootstrap_interval`` takes any Python statistic. ``bootstrap_sums_interval`` (and its
special case ``bootstrap_ratio_interval``) is the fast path for metrics that are a function of
per-unit sums, such as precision = TP / (TP + FP): it sums whole resamples with numpy instead
of calling Python once per resample. Both draw exactly the same resamples for the same number
of units, count and seed, so they give the same interval for the same metric.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T")

DEFAULT_RESAMPLES = 2000
DEFAULT_LEVEL = 0.95
# Fewer resamples than this make the tails of a 95% interval rest on a handful of draws.
MIN_RESAMPLES = 1000
# Index draws are made in blocks of about this many cells so that memory stays bounded for
# large unit counts; the block size depends only on the unit count, so draws are reproducible.
_BLOCK_CELLS = 1_000_000


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval and what is needed to reproduce it."""

    low: float
    high: float
    level: float
    resamples: int
    seed: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check(resamples: int, level: float) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int):
        raise ValueError(f"resamples: must be an integer, got {resamples!r}")
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"resamples: must be at least {MIN_RESAMPLES}, got {resamples}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: must be strictly between 0 and 1, got {level!r}")


def _index_blocks(n: int, resamples: int, seed: int) -> Iterator[npt.NDArray[np.int32]]:
    """Yield (block, n) arrays of unit indices, ``resamples`` rows in all."""
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_CELLS // max(n, 1))
    done = 0
    while done < resamples:
        rows = min(block, resamples - done)
        # 32-bit indices halve the memory and time of the draws; no board has 2**31 units.
        yield rng.integers(0, n, size=(rows, n), dtype=np.int32)
        done += rows


def _quantile_interval(
    values: npt.NDArray[np.float64], *, level: float, resamples: int, seed: int
) -> Interval | None:
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return Interval(low=float(low), high=float(high), level=level, resamples=resamples, seed=seed)


def bootstrap_distribution(
    units: Sequence[T],
    statistic: Callable[[Sequence[T]], float | None],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> npt.NDArray[np.float64]:
    """The statistic on every resample, in draw order; NaN where it was undefined (None)."""
    if resamples < 1:
        raise ValueError(f"resamples: must be positive, got {resamples}")
    n = len(units)
    out = np.full(resamples, np.nan)
    if n == 0:
        return out
    i = 0
    for block in _index_blocks(n, resamples, seed):
        for row in block.tolist():
            value = statistic([units[j] for j in row])
            if value is not None:
                out[i] = float(value)
            i += 1
    return out


def bootstrap_interval(
    units: Sequence[T],
    statistic: Callable[[Sequence[T]], float | None],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> Interval | None:
    """Percentile bootstrap interval of ``statistic`` over ``units`` resampled with replacement.

    None when there is no unit or the statistic is None on every resample.
    """
    _check(resamples, level)
    if len(units) == 0:
        return None
    values = bootstrap_distribution(units, statistic, resamples=resamples, seed=seed)
    return _quantile_interval(values, level=level, resamples=resamples, seed=seed)


def bootstrap_sums_interval(
    matrix: npt.ArrayLike,
    fn: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> Interval | None:
    """Interval of a statistic of per-unit sums, vectorised.

    ``matrix`` has one row per unit and one column per summed quantity (a 1-D array is one
    column). ``fn`` receives an array of shape ``(m, columns)`` holding the column sums of
    ``m`` resamples and returns ``m`` statistics, NaN where undefined (e.g. a ratio over 0).
    ``fn`` must be vectorised over rows; it is also called on the full-sample sums by callers
    who want the point estimate.
    """
    _check(resamples, level)
    data = np.asarray(matrix, dtype=np.float64)
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2:
        raise ValueError(f"matrix: must be 1-D or 2-D, got {data.ndim} dimensions")
    n = data.shape[0]
    if n == 0:
        return None
    values = np.empty(resamples)
    i = 0
    for block in _index_blocks(n, resamples, seed):
        sums = data[block].sum(axis=1)
        stats = np.asarray(fn(sums), dtype=np.float64).reshape(-1)
        if stats.shape[0] != block.shape[0]:
            raise ValueError(
                f"fn: must return one value per resample ({block.shape[0]}), got {stats.shape[0]}"
            )
        values[i : i + block.shape[0]] = stats
        i += block.shape[0]
    return _quantile_interval(values, level=level, resamples=resamples, seed=seed)


def _ratio(sums: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    num, den = sums[:, 0], sums[:, 1]
    out = np.full(num.shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def bootstrap_ratio_interval(
    numerators: Sequence[float],
    denominators: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> Interval | None:
    """Interval of ``sum(numerators) / sum(denominators)`` over units resampled together.

    A resample whose denominators sum to 0 is undefined and left out.
    """
    if len(numerators) != len(denominators):
        raise ValueError(
            f"denominators: {len(denominators)} values for {len(numerators)} numerators"
        )
    matrix = np.column_stack(
        [np.asarray(numerators, dtype=np.float64), np.asarray(denominators, dtype=np.float64)]
    ).reshape(len(numerators), 2)
    return bootstrap_sums_interval(matrix, _ratio, resamples=resamples, level=level, seed=seed)


def _widened(rows: Sequence[tuple[float, float, float]]) -> list[tuple[float, float]]:
    # A percentile interval need not contain its own point estimate (skewed statistics);
    # widening it to do so keeps each row's position inside its own rank range.
    return [(min(low, value), max(high, value)) for value, low, high in rows]


def widen_spans(
    values: npt.NDArray[np.float64], lows: npt.NDArray[np.float64], highs: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The array form of ``_widened``: each interval widened to contain its row's value."""
    return np.minimum(lows, values), np.maximum(highs, values)


def rank_ranges(rows: Sequence[tuple[float, float, float]]) -> list[tuple[int, int]]:
    """The ranks each row could take given the intervals, for rows ordered best first.

    Each row is ``(value, low, high)``; higher is better (negate a lower-is-better metric).
    A row's best possible rank is 1 + the number of rows whose low is above its high (they
    beat it whatever the truth within the intervals); its worst is the number of rows whose
    high is at or above its low, itself included (all of them could beat or tie it). An
    interval that does not contain its row's value is first widened to contain it, so a row's
    place in the table always lies within its range. Rows with the same interval get the same
    range. A row without an interval is passed as ``(value, value, value)``.
    """
    spans = _widened(rows)
    best, worst = span_rank_ranges(
        np.asarray([low for low, _ in spans], dtype=np.float64),
        np.asarray([high for _, high in spans], dtype=np.float64),
    )
    return list(zip(best.tolist(), worst.tolist(), strict=True))


def span_rank_ranges(
    lows: npt.NDArray[np.float64], highs: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``rank_ranges`` of already widened spans, as arrays (best ranks, worst ranks), in
    O(n log n): what a board of 100,000 rows re-ranks with when one of them changes."""
    n = len(lows)
    above = n - np.searchsorted(np.sort(lows), highs, side="right")
    could_beat = n - np.searchsorted(np.sort(highs), lows, side="left")
    return (1 + above).astype(np.int64), could_beat.astype(np.int64)


def tied_with_above(rows: Sequence[tuple[float, float, float]]) -> list[bool]:
    """True where a row's interval overlaps the interval of the row above it (rows best first).

    Intervals are closed and widened to contain their row's value, as in ``rank_ranges``; the
    first row is never tied with anything above it.
    """
    spans = _widened(rows)
    tied = span_ties(
        np.asarray([low for low, _ in spans], dtype=np.float64),
        np.asarray([high for _, high in spans], dtype=np.float64),
    )
    return [bool(t) for t in tied]


def span_ties(
    lows: npt.NDArray[np.float64], highs: npt.NDArray[np.float64]
) -> npt.NDArray[np.bool_]:
    """``tied_with_above`` of already widened spans (rows best first), as an array."""
    out = np.zeros(len(lows), dtype=np.bool_)
    if len(lows) > 1:
        out[1:] = (lows[1:] <= highs[:-1]) & (lows[:-1] <= highs[1:])
    return out


@dataclass(frozen=True)
class BoardRank:
    """A row's rank range and tie mark on a board (None: the row has no value to rank)."""

    rank_low: int | None
    rank_high: int | None
    tied: bool


def _exact_ranks(
    rows: Sequence[tuple[float, float, float]], exact: Sequence[bool]
) -> tuple[list[tuple[int, int]], list[bool]]:
    """``rank_ranges`` and ``tied_with_above`` where some rows' values are exact by definition.

    An exact row has no interval: against it, every row is compared by its value (a row
    above 0 beats an entry whose score is 0 by definition, whatever its own interval); two
    rows that are not exact are compared by their intervals, as in ``rank_ranges``.
    """
    spans = _widened(rows)
    loose = [span for span, fixed in zip(spans, exact, strict=True) if not fixed]
    loose_lows = sorted(low for low, _ in loose)
    loose_highs = sorted(high for _, high in loose)
    exact_values = sorted(v for (v, _, _), fixed in zip(rows, exact, strict=True) if fixed)
    all_values = sorted(v for v, _, _ in rows)
    n_loose, n_exact, n = len(loose), len(exact_values), len(rows)
    ranges = []
    for (value, _, _), (low, high), fixed in zip(rows, spans, exact, strict=True):
        if fixed:
            above = n - bisect.bisect_right(all_values, value)
            could_beat = n - bisect.bisect_left(all_values, value)
        else:
            above = (n_loose - bisect.bisect_right(loose_lows, high)) + (
                n_exact - bisect.bisect_right(exact_values, value)
            )
            could_beat = (n_loose - bisect.bisect_left(loose_highs, low)) + (
                n_exact - bisect.bisect_left(exact_values, value)
            )
        ranges.append((1 + above, could_beat))
    tied = [False] * n
    for i in range(1, n):
        if exact[i] or exact[i - 1]:
            tied[i] = rows[i][0] == rows[i - 1][0]
        else:
            (above_low, above_high), (low, high) = spans[i - 1], spans[i]
            tied[i] = low <= above_high and above_low <= high
    return ranges, tied


def board_ranks(
    rows: Sequence[tuple[float | None, float | None, float | None]],
    *,
    exact: Sequence[bool] | None = None,
) -> list[BoardRank]:
    """``rank_ranges`` and ``tied_with_above`` for board rows that may lack a value or interval.

    Rows are ``(value, low, high)`` best first. A row without an interval (an entry scored
    before intervals were stored) counts as the point ``(value, value, value)``; a row without
    a value (nothing scored) gets no rank range, is never tied, and is left out of the other
    rows' ranges, so it must come last. ``exact`` marks rows whose value is exact by
    definition (a checklist entry of the genuine paper alone has S = 0): see ``_exact_ranks``.
    """
    flags = list(exact) if exact is not None else [False] * len(rows)
    ranked = [
        (float(v), float(v if lo is None else lo), float(v if hi is None else hi))
        for v, lo, hi in rows
        if v is not None
    ]
    ranked_exact = [f for (v, _, _), f in zip(rows, flags, strict=True) if v is not None]
    if any(ranked_exact):
        ranges, ties = _exact_ranks(ranked, ranked_exact)
    else:
        ranges, ties = rank_ranges(ranked), tied_with_above(ranked)
    marks = iter(zip(ranges, ties, strict=True))
    out = []
    for value, _, _ in rows:
        if value is None:
            out.append(BoardRank(None, None, False))
        else:
            (best, worst), tied = next(marks)
            out.append(BoardRank(best, worst, tied))
    return out
