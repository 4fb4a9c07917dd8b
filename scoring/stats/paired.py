"""Paired comparisons of the entries of one board: one item resample shared by every entry.

Entries of a board are scored on the same items (truth findings, probes, checklist
questions), so an item that is hard for one entry tends to be hard for the others. Two
separate intervals ignore that, and their overlap calls many real differences tied. The
paired bootstrap resamples the items once per draw, for every entry alike, computes each
entry's metric on that resample and takes the percentile interval of the *difference*
between two entries' metrics (same draws as :mod:`scoring.stats.bootstrap`, so each entry's
own interval is exactly its unpaired one).

The paired rule, for rows ordered best first:

* two entries differ significantly when the ``level`` interval of their paired difference
  excludes 0. The interval is the *expanded* percentile interval (Hesterberg, "What
  teachers should know about the bootstrap", 2015): the percentile interval at the level
  whose normal quantile is ``sqrt(n / (n - 1)) * t(n - 1)``'s, for ``n`` items. The plain
  percentile interval is too narrow on few items (on 15 checklist questions it calls a
  zero difference tied well under 95% of the time); the expansion fades as ``n`` grows;
* only pairs the unpaired rule leaves undecided (their intervals overlap, or for an exact
  row, their values are equal) are tested; pairs the unpaired rule already separates stay
  separated. So the paired rule can only split ties, never join entries;
* to bound the work on large boards, an entry is tested against the overlapping entries
  within ``window`` places of it; an overlapping pair further apart stays undecided (as
  under the unpaired rule);
* each tested pair gets a two-sided p-value: the bootstrap's (twice the smaller share of
  resampled differences on either side of 0), carried through the same expansion as the
  interval (:func:`expanded_p_value`), and, where the entries' per-item rows are given, no
  smaller than an exact test's on the items where the two differ (:func:`exact_p_value`: the
  exact sign test, i.e. exact McNemar on 0/1 items; for items of several quantities the
  smallest p any sign test on that many discordant items can reach). Two entries that differ
  on 4 items, all the same way, have p = 0.125 and are never called different, however the
  bootstrap's interval falls on so few distinct resamples;
* multiplicity: a board tests many pairs at once (12 equal entries: 66 pairs, and at least
  one of them "significant" on most boards without a correction). The p-values of all pairs
  tested on a board are adjusted by Holm's step-down method (:func:`holm_adjust`), which
  bounds the chance of calling any equal pair different at ``1 - level``; a pair differs
  when its adjusted p-value is at most ``1 - level``;
* rank range: best = 1 + the number of entries significantly better; worst = the number of
  ranked entries minus the number significantly worse;
* "tied with the row above": the two are not significantly different.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from scoring.stats.bootstrap import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    _check,
    _exact_ranks,
    _index_blocks,
    span_rank_ranges,
)

# An entry is tested against overlapping entries at most this many places above and below.
PAIRED_WINDOW = 50
# The seed of every paired resample the site draws (a board's marks and a two-row comparison
# alike), so a comparison page repeats the marks' draws and a refresh repeats the page's.
PAIRED_SEED = 0

Statistic = Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]


@dataclass(frozen=True)
class PairedEntry:
    """One entry's per-item quantities, rows in the board's item order, and its metric.

    ``matrix`` has one row per item and one column per summed quantity; ``statistic`` maps
    an ``(m, columns)`` array of resample sums to ``m`` metric values (as for
    :func:`scoring.stats.bootstrap.bootstrap_sums_interval`).
    """

    matrix: npt.NDArray[np.float64]
    statistic: Statistic


def _matrix(entry: PairedEntry) -> npt.NDArray[np.float64]:
    data = np.asarray(entry.matrix, dtype=np.float64)
    return data[:, None] if data.ndim == 1 else data


def paired_distributions(
    entries: Sequence[PairedEntry],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Every entry's metric on the full sample and on each shared resample.

    Returns ``(values, draws)``: ``values[e]`` is entry ``e``'s metric on all items and
    ``draws[e, b]`` its metric on resample ``b`` (NaN where undefined). All entries must have
    the same number of items and columns. The resamples are the draws of
    :mod:`scoring.stats.bootstrap` for that item count and seed, turned into per-item counts
    so that every entry's sums are one matrix product.
    """
    if resamples < 1:
        raise ValueError(f"resamples: must be positive, got {resamples}")
    mats = [_matrix(e) for e in entries]
    if not mats:
        return np.zeros(0), np.zeros((0, resamples))
    n, k = mats[0].shape
    for i, m in enumerate(mats):
        if m.shape != (n, k):
            raise ValueError(f"entries[{i}]: matrix of shape {m.shape}, expected {(n, k)}")
    values = np.asarray(
        [
            float(np.asarray(e.statistic(m.sum(axis=0)[None, :])).reshape(-1)[0])
            for e, m in zip(entries, mats, strict=True)
        ]
    )
    draws = np.full((len(entries), resamples), np.nan)
    if n == 0:
        return values, draws
    stacked = np.concatenate(mats, axis=1)  # (n, entries * k)
    done = 0
    for block in _index_blocks(n, resamples, seed):
        rows = block.shape[0]
        offsets = block.astype(np.int64) + (np.arange(rows, dtype=np.int64) * n)[:, None]
        counts = np.bincount(offsets.ravel(), minlength=rows * n).reshape(rows, n)
        sums = counts.astype(np.float64) @ stacked  # (rows, entries * k)
        for e, entry in enumerate(entries):
            stats = np.asarray(entry.statistic(sums[:, e * k : (e + 1) * k]), dtype=np.float64)
            draws[e, done : done + rows] = stats.reshape(-1)
        done += rows
    return values, draws


def expanded_level(level: float, items: int) -> float:
    """The percentile level that gives the expanded ``level`` interval over ``items`` items
    (module doc); ``level`` itself for fewer than 2 items."""
    if items < 2:
        return level
    # Imported here: scipy takes about a second to load, and every web and worker process
    # imports this module through the boards while only the paired refresh needs it.
    from scipy.stats import norm, t

    z = math.sqrt(items / (items - 1)) * float(t.ppf(1.0 - (1.0 - level) / 2.0, items - 1))
    return float(1.0 - 2.0 * norm.sf(z))


def holm_adjust(p_values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Holm's step-down adjusted p-values, in the order given.

    The ``k``-th smallest of ``m`` p-values is multiplied by ``m - k + 1``, and the adjusted
    values are made non-decreasing in that order (and capped at 1). Rejecting every pair whose
    adjusted p-value is at most ``alpha`` bounds the family-wise error at ``alpha`` under any
    dependence between the tests (Holm 1979), which the pairs of one board have: they share
    entries and resamples.
    """
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    m = p.size
    if m == 0:
        return p.copy()
    if np.isnan(p).any():
        raise ValueError("p_values: NaN is not a p-value")
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (m - np.arange(m, dtype=np.float64))
    adjusted_sorted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = adjusted_sorted
    return adjusted


@functools.lru_cache(maxsize=4096)
def sign_test_p_value(wins: int, losses: int) -> float:
    """The exact two-sided sign test of ``wins`` against ``losses`` (ties left out): twice the
    binomial(wins + losses, 1/2) tail of the rarer side, capped at 1. On 0/1 items it is the
    exact McNemar test of the discordant pairs."""
    if wins < 0 or losses < 0:
        raise ValueError(f"wins, losses: must not be negative, got {wins}, {losses}")
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    # Exact integers: 2.0**n overflows a float beyond 1,023 discordant items.
    tail = Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n)
    return min(1.0, float(2 * tail))


def min_discordance_p_value(discordant: int) -> float:
    """The smallest two-sided p-value any sign test can reach on ``discordant`` items: the
    one where all of them go the same way (4 items: 0.125)."""
    return sign_test_p_value(discordant, 0)


def exact_p_value(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[float, int]:
    """``(p, discordant)``: an exact test of entries ``a`` and ``b`` on their per-item rows
    (one row per item, the same items in the same order) and the number of items on which
    the rows differ.

    Items of one quantity: the exact sign test of the items where ``a`` is higher against
    those where ``b`` is (exact McNemar on 0/1 items). Items of several quantities have no
    one direction per item, so the minimum-discordance bound is used: the smallest p any
    sign test on that many discordant items could give. Either way, a difference resting on
    a handful of items is never significant.
    """
    ma = np.asarray(a, dtype=np.float64)
    mb = np.asarray(b, dtype=np.float64)
    ma = ma[:, None] if ma.ndim == 1 else ma
    mb = mb[:, None] if mb.ndim == 1 else mb
    if ma.shape != mb.shape:
        raise ValueError(f"b: per-item rows of shape {mb.shape}, expected {ma.shape}")
    differs = (ma != mb).any(axis=1)
    discordant = int(differs.sum())
    if ma.shape[1] == 1:
        wins = int((ma[:, 0] > mb[:, 0]).sum())
        return sign_test_p_value(wins, discordant - wins), discordant
    return min_discordance_p_value(discordant), discordant


def _bootstrap_p_values(diffs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per row of resampled differences, the two-sided bootstrap p-value of "no difference":
    twice the smaller share of draws on either side of 0 (0 itself counted on both), NaN
    draws left out (NaN where every draw is)."""
    valid = ~np.isnan(diffs)
    count = valid.sum(axis=1).astype(np.float64)
    below = ((diffs <= 0) & valid).sum(axis=1)
    above = ((diffs >= 0) & valid).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.minimum(1.0, 2.0 * np.minimum(below, above) / count)
    return np.where(count > 0, p, np.nan)


def expanded_p_value(p: npt.ArrayLike, items: int) -> npt.NDArray[np.float64]:
    """Bootstrap p-values carried through the interval's expansion (module doc): the expanded
    ``level`` interval excludes 0 exactly when the result is below ``1 - level``. Unchanged
    for fewer than 2 items."""
    values = np.asarray(p, dtype=np.float64)
    if items < 2:
        return values
    from scipy.stats import norm, t

    z = norm.isf(values / 2.0) / math.sqrt(items / (items - 1))
    return np.asarray(2.0 * t.sf(z, items - 1), dtype=np.float64)


@dataclass(frozen=True)
class Difference:
    """``a - b`` on all items and its paired (expanded percentile) interval at ``level``;
    ``percentile`` is the plain percentile level that interval was read at.

    ``p_value``: the bootstrap's two-sided p-value, expanded as the interval is;
    ``exact_p``: the exact test's on the ``discordant`` items that differ
    (:func:`exact_p_value`); ``draws``: the resampled differences (NaN left out), for a
    picture of their distribution. The pair is significant, on its own (no correction for
    other pairs), when the interval excludes 0 and the exact test agrees at ``1 - level``.
    """

    value: float
    low: float
    high: float
    level: float
    percentile: float
    resamples: int
    seed: int
    p_value: float = 1.0
    exact_p: float = 0.0
    discordant: int = 0
    draws: tuple[float, ...] = ()

    @property
    def interval_excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    @property
    def significant(self) -> bool:
        return self.interval_excludes_zero and self.exact_p <= 1.0 - self.level


def _quantiles(diffs: npt.NDArray[np.float64], level: float) -> npt.NDArray[np.float64]:
    """(rows, 2) low and high percentile of each row of ``diffs``, NaN draws left out."""
    tail = (1.0 - level) / 2.0
    if not np.isnan(diffs).any():
        return np.quantile(diffs, [tail, 1.0 - tail], axis=1).T
    out = np.full((diffs.shape[0], 2), np.nan)
    for i, row in enumerate(diffs):
        row = row[~np.isnan(row)]
        if row.size:
            out[i] = np.quantile(row, [tail, 1.0 - tail])
    return out


def paired_difference(
    a: PairedEntry,
    b: PairedEntry,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> Difference | None:
    """The paired difference ``a - b`` of two entries scored on the same items; None when it
    is undefined on every resample."""
    _check(resamples, level)
    values, draws = paired_distributions([a, b], resamples=resamples, seed=seed)
    percentile = expanded_level(level, _matrix(a).shape[0])
    diffs = draws[0] - draws[1]
    ((low, high),) = _quantiles(diffs[None, :], percentile)
    if np.isnan(low):
        return None
    items = _matrix(a).shape[0]
    (p_value,) = expanded_p_value(_bootstrap_p_values(diffs[None, :]), items)
    exact_p, discordant = exact_p_value(_matrix(a), _matrix(b))
    return Difference(
        value=float(values[0] - values[1]),
        low=float(low),
        high=float(high),
        level=level,
        percentile=percentile,
        resamples=resamples,
        seed=seed,
        p_value=float(p_value),
        exact_p=exact_p,
        discordant=discordant,
        draws=tuple(float(d) for d in diffs[~np.isnan(diffs)]),
    )


@dataclass(frozen=True)
class PairedMarks:
    """The paired marks of the rows given to :func:`paired_marks` (rows best first)."""

    rank_low: npt.NDArray[np.int64]
    rank_high: npt.NDArray[np.int64]
    tied_with_above: npt.NDArray[np.bool_]
    tested_pairs: int
    split_pairs: int
    # Holm over the ``tested_pairs``; the exact test gated them when per-item rows were given.
    correction: str = "holm"
    exact_test: bool = False


def _undecided(
    i: npt.NDArray[np.int64],
    j: npt.NDArray[np.int64],
    lows: npt.NDArray[np.float64],
    highs: npt.NDArray[np.float64],
    values: npt.NDArray[np.float64],
    exact: npt.NDArray[np.bool_],
) -> npt.NDArray[np.bool_]:
    """The pairs ``(i, j)`` the unpaired rule leaves tied: their widened intervals overlap
    (with an exact row, the two values are equal)."""
    either = exact[i] | exact[j]
    overlap = (lows[i] <= highs[j]) & (lows[j] <= highs[i])
    return np.where(either, values[i] == values[j], overlap)


def _unpaired_counts(
    values: npt.NDArray[np.float64],
    lows: npt.NDArray[np.float64],
    highs: npt.NDArray[np.float64],
    exact: npt.NDArray[np.bool_],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per row, how many rows the unpaired rule puts surely above it and surely below it."""
    n = len(values)
    if exact.any():
        rows = list(zip(values.tolist(), lows.tolist(), highs.tolist(), strict=True))
        ranges, _ = _exact_ranks(rows, exact.tolist())
        best = np.asarray([b for b, _ in ranges], dtype=np.int64)
        worst = np.asarray([w for _, w in ranges], dtype=np.int64)
    else:
        best, worst = span_rank_ranges(lows, highs)
    return best - 1, n - worst


# Pair differences are taken this many cells at a time, so memory stays bounded.
_PAIR_CELLS = 4_000_000


def paired_marks(
    draws: npt.NDArray[np.float64],
    *,
    values: npt.NDArray[np.float64],
    lows: npt.NDArray[np.float64],
    highs: npt.NDArray[np.float64],
    exact: npt.NDArray[np.bool_] | None = None,
    tested: npt.NDArray[np.bool_] | None = None,
    items: int,
    level: float = DEFAULT_LEVEL,
    window: int = PAIRED_WINDOW,
    matrices: Sequence[npt.ArrayLike] | None = None,
) -> PairedMarks:
    """Rank ranges and ties of ranked rows (best first) by the paired rule (module doc).

    ``draws`` holds the metric of each tested row (in order) on the shared resamples
    (:func:`paired_distributions`);
    ``lows``/``highs`` are the rows' unpaired intervals already widened to contain their
    values; ``exact`` marks rows whose value is exact by definition; ``tested`` marks the rows
    that have draws (the others are compared by the unpaired rule only); ``items`` is the
    number of items the draws resampled (for the expanded interval); ``matrices``, one per
    tested row in the order of ``draws``, are the rows' per-item quantities (the
    :attr:`PairedEntry.matrix`), for the exact test (:func:`exact_p_value`). The p-values of
    all the pairs tested are adjusted by Holm's method (:func:`holm_adjust`).
    """
    values = np.asarray(values, dtype=np.float64)
    lows = np.asarray(lows, dtype=np.float64)
    highs = np.asarray(highs, dtype=np.float64)
    n = len(values)
    exact = np.zeros(n, dtype=np.bool_) if exact is None else np.asarray(exact, dtype=np.bool_)
    tested = np.ones(n, dtype=np.bool_) if tested is None else np.asarray(tested, dtype=np.bool_)
    better, worse = _unpaired_counts(values, lows, highs, exact)
    tied = np.zeros(n, dtype=np.bool_)
    if n > 1:
        first = np.arange(n - 1, dtype=np.int64)
        tied[1:] = _undecided(first, first + 1, lows, highs, values, exact)
    pi_parts, pj_parts = [], []
    for d in range(1, min(window, n - 1) + 1):
        i = np.arange(n - d, dtype=np.int64)
        j = i + d
        keep = _undecided(i, j, lows, highs, values, exact) & tested[i] & tested[j]
        pi_parts.append(i[keep])
        pj_parts.append(j[keep])
    pi = np.concatenate(pi_parts) if pi_parts else np.zeros(0, dtype=np.int64)
    pj = np.concatenate(pj_parts) if pj_parts else np.zeros(0, dtype=np.int64)
    verdict = np.zeros(len(pi), dtype=np.int64)  # 1: i better, -1: j better, 0: tied
    p_values = np.ones(len(pi), dtype=np.float64)
    direction = np.zeros(len(pi), dtype=np.int64)
    row_of = np.cumsum(tested) - 1  # a tested row's index in ``draws``
    step = max(1, _PAIR_CELLS // max(1, draws.shape[1] if draws.ndim == 2 else 1))
    for start in range(0, len(pi), step):
        a, b = pi[start : start + step], pj[start : start + step]
        diffs = draws[row_of[a]] - draws[row_of[b]]
        boot = np.nan_to_num(expanded_p_value(_bootstrap_p_values(diffs), items), nan=1.0)
        p_values[start : start + step] = boot
        # The side of 0 most draws fall on (NaN draws on neither); read where rejected.
        higher = (diffs > 0).sum(axis=1) >= (diffs < 0).sum(axis=1)
        direction[start : start + step] = np.where(higher, 1, -1)
    discordant = np.zeros(len(pi), dtype=np.int64)
    if matrices is not None and len(pi):
        for index, (a_row, b_row) in enumerate(zip(row_of[pi], row_of[pj], strict=True)):
            exact_p, discordant[index] = exact_p_value(matrices[a_row], matrices[b_row])
            p_values[index] = max(p_values[index], exact_p)
    adjusted = holm_adjust(p_values)
    alpha = 1.0 - level
    rejected = adjusted <= alpha
    verdict[rejected] = direction[rejected]
    np.add.at(better, pj[verdict == 1], 1)
    np.add.at(worse, pi[verdict == 1], 1)
    np.add.at(better, pi[verdict == -1], 1)
    np.add.at(worse, pj[verdict == -1], 1)
    adjacent = pj == pi + 1
    tied[pj[adjacent]] = verdict[adjacent] == 0
    return PairedMarks(
        rank_low=(1 + better).astype(np.int64),
        rank_high=(n - worse).astype(np.int64),
        tied_with_above=tied,
        tested_pairs=len(pi),
        split_pairs=int((verdict != 0).sum()),
        exact_test=matrices is not None,
    )
