"""The paired rule: shared resamples, paired differences, and the marks they give."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.stats.bootstrap import bootstrap_sums_interval, span_rank_ranges, span_ties
from scoring.stats.paired import (
    PairedEntry,
    expanded_level,
    paired_difference,
    paired_distributions,
    paired_marks,
)

RESAMPLES = 1000


def _mean(n: int):
    return lambda sums: sums[:, 0] / n


def _entry(scores: npt.ArrayLike) -> PairedEntry:
    data = np.asarray(scores, dtype=np.float64)
    return PairedEntry(matrix=data, statistic=_mean(len(data)))


def _board(entries: list[PairedEntry]):
    """Rows best first with their widened unpaired spans and draws."""
    values, draws = paired_distributions(entries, resamples=RESAMPLES)
    order = np.argsort(-values, kind="stable")
    values, draws = values[order], draws[order]
    lows = np.minimum(np.quantile(draws, 0.025, axis=1), values)
    highs = np.maximum(np.quantile(draws, 0.975, axis=1), values)
    return order, values, draws, lows, highs


scores = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=5, max_size=60)


def test_each_entry_draws_are_its_unpaired_interval() -> None:
    rng = np.random.default_rng(3)
    data = [rng.random(40), (rng.random(40) < 0.5).astype(float)]
    _, draws = paired_distributions([_entry(d) for d in data], resamples=RESAMPLES, seed=7)
    for row, d in zip(draws, data, strict=True):
        interval = bootstrap_sums_interval(d, _mean(40), resamples=RESAMPLES, seed=7)
        assert interval is not None
        low, high = np.quantile(row, [0.025, 0.975])
        assert (low, high) == pytest.approx((interval.low, interval.high))


@settings(max_examples=40, deadline=None)
@given(scores, st.integers(2, 5))
def test_identical_entries_always_tie(items: list[float], copies: int) -> None:
    entries = [_entry(items) for _ in range(copies)]
    _, values, draws, lows, highs = _board(entries)
    marks = paired_marks(draws, values=values, lows=lows, highs=highs, items=len(items))
    assert marks.tied_with_above[1:].all()
    assert (marks.rank_low == 1).all() and (marks.rank_high == copies).all()
    diff = paired_difference(entries[0], entries[1], resamples=RESAMPLES)
    assert diff is not None and diff.low == diff.high == diff.value == 0.0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0.0, 0.5, allow_nan=False), min_size=10, max_size=60),
    st.floats(0.001, 0.5),
)
def test_a_shifted_copy_is_ranked_below(items: list[float], shift: float) -> None:
    # Every item lower by the same amount: the paired difference is exactly the shift on
    # every resample, so any shift at all separates the two, however wide their own
    # intervals are (the unpaired rule ties them whenever the shift is below the width).
    upper = _entry(np.asarray(items) + shift)
    lower = _entry(items)
    order, values, draws, lows, highs = _board([lower, upper])
    assert order.tolist() == [1, 0]
    marks = paired_marks(draws, values=values, lows=lows, highs=highs, items=len(items))
    assert not marks.tied_with_above[1]
    assert marks.rank_low.tolist() == [1, 2] and marks.rank_high.tolist() == [1, 2]
    diff = paired_difference(upper, lower, resamples=RESAMPLES)
    assert diff is not None and diff.low == pytest.approx(shift)
    assert diff.significant


def test_a_noisy_shift_is_separated_once_large_enough() -> None:
    rng = np.random.default_rng(0)
    base = (rng.random(200) < 0.5).astype(float)
    seen = []
    for flips in (0, 2, 30):
        # ``flips`` of the hits turned into misses: a difference of flips / 200.
        hits = np.flatnonzero(base)[:flips]
        lower = base.copy()
        lower[hits] = 0.0
        diff = paired_difference(_entry(base), _entry(lower), resamples=RESAMPLES)
        assert diff is not None
        seen.append(diff.significant)
    assert seen == [False, False, True]


@settings(max_examples=30, deadline=None)
@given(st.lists(scores, min_size=1, max_size=6))
def test_paired_rule_only_splits_unpaired_ties(rows: list[list[float]]) -> None:
    n = min(len(r) for r in rows)
    entries = [_entry(r[:n]) for r in rows]
    _, values, draws, lows, highs = _board(entries)
    marks = paired_marks(draws, values=values, lows=lows, highs=highs, items=n)
    best, worst = span_rank_ranges(lows, highs)
    unpaired_ties = span_ties(lows, highs)
    assert (marks.rank_low >= best).all() and (marks.rank_high <= worst).all()
    assert (marks.rank_low <= marks.rank_high).all()
    assert not (marks.tied_with_above & ~unpaired_ties).any()


def test_window_bounds_the_pairs_tested() -> None:
    entries = [_entry(np.full(10, 0.5)) for _ in range(30)]
    _, values, draws, lows, highs = _board(entries)
    marks = paired_marks(draws, values=values, lows=lows, highs=highs, items=10, window=3)
    assert marks.tested_pairs == 27 + 28 + 29
    untested = paired_marks(
        draws[:0], values=values, lows=lows, highs=highs, items=10, tested=np.zeros(30, bool)
    )
    assert untested.tested_pairs == 0 and untested.tied_with_above[1:].all()


def test_exact_rows_are_compared_by_value() -> None:
    # An exact 0 below a row whose interval reaches 0: separated by the unpaired rule
    # already, and the paired rule never joins them.
    entries = [_entry([0.0, 0.0, 0.0, 1.0]), _entry([0.0, 0.0, 0.0, 0.0])]
    _, values, draws, lows, highs = _board(entries)
    marks = paired_marks(
        draws, values=values, lows=lows, highs=highs, items=4, exact=np.asarray([False, True])
    )
    assert not marks.tied_with_above[1]
    assert marks.rank_low.tolist() == [1, 2]


def test_the_expanded_interval_widens_on_few_items_only() -> None:
    assert expanded_level(0.95, 15) == pytest.approx(0.973, abs=0.001)
    assert 0.95 < expanded_level(0.95, 2000) < 0.951
    assert expanded_level(0.95, 1) == 0.95
    rng = np.random.default_rng(5)
    a, b = rng.random(15), rng.random(15)
    diff = paired_difference(_entry(a), _entry(b), resamples=RESAMPLES)
    assert diff is not None and diff.percentile == expanded_level(0.95, 15)
    plain = np.quantile(
        paired_distributions([_entry(a), _entry(b)], resamples=RESAMPLES)[1][0]
        - paired_distributions([_entry(a), _entry(b)], resamples=RESAMPLES)[1][1],
        [0.025, 0.975],
    )
    assert diff.low < plain[0] and diff.high > plain[1]


def test_mismatched_items_are_refused() -> None:
    with pytest.raises(ValueError, match=r"entries\[1\]"):
        paired_distributions([_entry([1.0, 0.0]), _entry([1.0])])
