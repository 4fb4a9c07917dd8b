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
    exact_p_value,
    expanded_level,
    holm_adjust,
    min_discordance_p_value,
    paired_difference,
    paired_distributions,
    paired_marks,
    sign_test_p_value,
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


def test_holm_adjusts_step_down_and_keeps_the_order_given() -> None:
    adjusted = holm_adjust([0.01, 0.04, 0.03, 0.005])
    # Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04, then made
    # non-decreasing (0.04 -> 0.06).
    assert adjusted.tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([0.5, 0.6, 0.9]).tolist() == [1.0, 1.0, 1.0]
    assert holm_adjust([0.2, 0.01]).tolist() == pytest.approx([0.2, 0.02])
    assert holm_adjust([]).size == 0
    with pytest.raises(ValueError, match="p_values"):
        holm_adjust([0.1, float("nan")])


@pytest.mark.parametrize(
    ("wins", "losses", "expected"),
    [(4, 0, 0.125), (0, 4, 0.125), (5, 0, 0.0625), (6, 0, 0.03125), (3, 1, 0.625), (0, 0, 1.0)],
)
def test_the_sign_test_is_exact(wins: int, losses: int, expected: float) -> None:
    assert sign_test_p_value(wins, losses) == pytest.approx(expected)


def test_the_sign_test_matches_scipy_and_survives_many_items() -> None:
    from scipy.stats import binomtest

    for wins, losses in ((7, 2), (30, 12), (100, 80)):
        reference = binomtest(wins, wins + losses, 0.5).pvalue
        assert sign_test_p_value(wins, losses) == pytest.approx(reference)
    assert sign_test_p_value(1500, 1500) == 1.0
    assert 0.0 <= sign_test_p_value(1200, 0) < 1e-300


def test_the_exact_test_counts_discordant_items() -> None:
    a = np.asarray([1, 1, 1, 1, 0, 1, 0, 0, 1, 0], dtype=float)
    b = np.asarray([0, 0, 0, 0, 0, 1, 0, 0, 1, 0], dtype=float)
    assert exact_p_value(a, b) == (0.125, 4)
    # Items of several quantities have no direction: the minimum-discordance bound.
    two = np.stack([a, np.ones(10)], axis=1)
    other = np.stack([b, np.ones(10)], axis=1)
    assert exact_p_value(two, other) == (min_discordance_p_value(4), 4) == (0.125, 4)
    with pytest.raises(ValueError, match="b:"):
        exact_p_value(a, b[:5])


def test_four_items_all_one_way_are_not_called_different() -> None:
    # 4 of 20 items flipped from hit to miss: every resampled difference is >= 0 and the
    # expanded percentile interval excludes 0, but the exact McNemar p is 0.125.
    upper = np.zeros(20)
    upper[:10] = 1.0
    lower = upper.copy()
    lower[:4] = 0.0
    diff = paired_difference(_entry(upper), _entry(lower), resamples=2000)
    assert diff is not None
    assert diff.interval_excludes_zero
    assert (diff.exact_p, diff.discordant) == (0.125, 4)
    assert not diff.significant
    # On the board as well: the two stay tied.
    _, values, draws, lows, highs = _board([upper_entry := _entry(upper), _entry(lower)])
    marks = paired_marks(
        draws,
        values=values,
        lows=lows,
        highs=highs,
        items=20,
        matrices=[upper_entry.matrix, lower],
    )
    assert marks.tied_with_above[1] and marks.exact_test
    without_exact = paired_marks(draws, values=values, lows=lows, highs=highs, items=20)
    assert not without_exact.tied_with_above[1]


def test_holm_keeps_a_board_of_equal_entries_mostly_tied() -> None:
    # Twelve entries of the same quality on 100 items, 20 boards: without a correction,
    # 66 pairs at 5% each split at least one pair on most boards; Holm bounds it near 5%.
    split_boards = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        entries = [_entry((rng.random(100) < 0.6).astype(float)) for _ in range(12)]
        _, values, draws, lows, highs = _board(entries)
        marks = paired_marks(draws, values=values, lows=lows, highs=highs, items=100)
        assert marks.correction == "holm"
        split_boards += marks.split_pairs > 0
    assert split_boards <= 2
