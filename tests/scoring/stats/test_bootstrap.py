from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from scoring.stats import (
    Interval,
    bootstrap_distribution,
    bootstrap_interval,
    bootstrap_ratio_interval,
    bootstrap_sums_interval,
    rank_ranges,
    tied_with_above,
)


def _mean(xs):
    return sum(xs) / len(xs) if xs else None


def _exact_sums() -> Counter[int]:
    # All 27 equally likely resamples of the units 0, 1, 2: the sum's exact distribution.
    return Counter(sum(r) for r in itertools.product([0, 1, 2], repeat=3))


def test_exact_distribution_of_three_units_matches_enumeration() -> None:
    exact = _exact_sums()
    assert exact == {0: 1, 1: 3, 2: 6, 3: 7, 4: 6, 5: 3, 6: 1}
    draws = 20_000
    values = bootstrap_distribution([0, 1, 2], _mean, resamples=draws, seed=3)
    seen = Counter(round(v * 3) for v in values)
    assert set(seen) <= set(exact)
    for total, ways in exact.items():
        p = ways / 27
        se = (p * (1 - p) / draws) ** 0.5
        assert abs(seen[total] / draws - p) < 5 * se, (total, seen[total])


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        # Exact CDF of the sum: 1/27, 4/27, 10/27, 17/27, 23/27, 26/27, 1. The 25% and 75%
        # quantiles fall inside the steps of sums 2 and 4, the 2.5% and 97.5% inside 0 and 6,
        # each far (many standard errors at 20,000 draws) from a step edge.
        (0.5, (2 / 3, 4 / 3)),
        (0.95, (0.0, 2.0)),
    ],
)
def test_interval_of_three_units_is_the_hand_computed_quantiles(level, expected) -> None:
    slow = bootstrap_interval([0, 1, 2], _mean, resamples=20_000, level=level, seed=1)
    fast = bootstrap_sums_interval(
        [0.0, 1.0, 2.0], lambda s: s[:, 0] / 3, resamples=20_000, level=level, seed=1
    )
    for got in (slow, fast):
        assert got is not None
        assert got.low == pytest.approx(expected[0])
        assert got.high == pytest.approx(expected[1])
        assert (got.level, got.resamples, got.seed) == (level, 20_000, 1)


def test_degenerate_units_give_a_point_interval() -> None:
    got = bootstrap_interval([0.25] * 12, _mean, seed=5)
    assert got == Interval(low=0.25, high=0.25, level=0.95, resamples=2000, seed=5)
    assert got.as_dict() == {
        "low": 0.25,
        "high": 0.25,
        "level": 0.95,
        "resamples": 2000,
        "seed": 5,
    }


def test_no_units_or_never_defined_gives_none() -> None:
    assert bootstrap_interval([], _mean) is None
    assert bootstrap_interval([1, 2, 3], lambda xs: None) is None
    assert bootstrap_ratio_interval([], []) is None
    assert bootstrap_ratio_interval([0, 0], [0, 0]) is None


def test_undefined_resamples_are_skipped() -> None:
    # Units (1/1) and (0/0): a resample of two copies of the second has no denominator and
    # is left out; every other resample has ratio 1.
    got = bootstrap_ratio_interval([1, 0], [1, 0], seed=2)
    assert got is not None
    assert (got.low, got.high) == (1.0, 1.0)
    values = bootstrap_distribution(
        [(1, 1), (0, 0)],
        lambda us: (sum(u[0] for u in us) / d) if (d := sum(u[1] for u in us)) else None,
        resamples=4000,
        seed=2,
    )
    share_undefined = float(np.isnan(values).mean())
    assert abs(share_undefined - 0.25) < 5 * (0.25 * 0.75 / 4000) ** 0.5


def test_same_seed_same_interval_other_seed_may_differ() -> None:
    rng = np.random.default_rng(42)
    units = rng.random(60).tolist()
    a = bootstrap_interval(units, _mean, seed=7)
    b = bootstrap_interval(units, _mean, seed=7)
    c = bootstrap_interval(units, _mean, seed=8)
    assert a == b
    assert a is not None and c is not None
    assert (a.low, a.high) != (c.low, c.high)
    assert a.low < float(np.mean(units)) < a.high


def test_fast_ratio_path_draws_the_same_resamples_as_the_generic_one() -> None:
    rng = np.random.default_rng(0)
    tp = rng.integers(0, 3, size=200).tolist()
    found = [t + int(x) for t, x in zip(tp, rng.integers(0, 2, size=200), strict=True)]
    units = list(zip(tp, found, strict=True))

    def precision(us):
        den = sum(u[1] for u in us)
        return sum(u[0] for u in us) / den if den else None

    slow = bootstrap_interval(units, precision, seed=11)
    fast = bootstrap_ratio_interval(tp, found, seed=11)
    assert slow is not None and fast is not None
    assert fast.low == pytest.approx(slow.low, abs=1e-12)
    assert fast.high == pytest.approx(slow.high, abs=1e-12)
    assert fast.low < sum(tp) / sum(found) < fast.high


def test_large_unit_counts_are_drawn_in_blocks_reproducibly() -> None:
    units = np.linspace(0.0, 1.0, 5001)
    a = bootstrap_sums_interval(units, lambda s: s[:, 0] / units.size, seed=4)
    b = bootstrap_sums_interval(units, lambda s: s[:, 0] / units.size, seed=4)
    assert a == b and a is not None
    # Standard error of the mean of a uniform grid: about 0.289 / sqrt(5001) = 0.0041.
    assert 0.49 < a.low < 0.5 < a.high < 0.51


@pytest.mark.parametrize("resamples", [0, 999, 1.5e3])
def test_fewer_than_1000_resamples_or_non_integers_are_refused(resamples) -> None:
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_interval([1, 2], _mean, resamples=resamples)
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_ratio_interval([1, 2], [2, 2], resamples=resamples)


@pytest.mark.parametrize("level", [0.0, 1.0, 95])
def test_level_outside_0_1_is_refused(level) -> None:
    with pytest.raises(ValueError, match="level"):
        bootstrap_interval([1, 2], _mean, level=level)


def test_mismatched_ratio_lengths_and_bad_fn_are_refused() -> None:
    with pytest.raises(ValueError, match="denominators"):
        bootstrap_ratio_interval([1, 2], [1])
    with pytest.raises(ValueError, match="fn"):
        bootstrap_sums_interval([1.0, 2.0], lambda s: s[:1, 0])


ROWS = [
    (0.90, 0.85, 0.95),
    (0.80, 0.75, 0.88),  # overlaps the first
    (0.50, 0.45, 0.55),
    (0.50, 0.45, 0.55),  # identical to the row above
    (0.10, 0.00, 0.20),
]


def test_rank_ranges_by_hand() -> None:
    # Row 3: rows 1 and 2 have lows (0.85, 0.75) above its high 0.55, so best = 3; rows 1-4
    # have highs at or above its low 0.45, so worst = 4.
    assert rank_ranges(ROWS) == [(1, 2), (1, 2), (3, 4), (3, 4), (5, 5)]


def test_ties_by_hand() -> None:
    assert tied_with_above(ROWS) == [False, True, False, True, False]


def test_touching_intervals_tie_and_rows_without_interval_are_points() -> None:
    rows = [(0.6, 0.6, 0.6), (0.5, 0.4, 0.6), (0.3, 0.3, 0.3)]
    assert tied_with_above(rows) == [False, True, False]
    assert rank_ranges(rows) == [(1, 2), (1, 2), (3, 3)]


def test_an_interval_missing_its_value_is_widened() -> None:
    # The second row's interval (0.1, 0.2) lies below its own value 0.8 (a skewed statistic);
    # widened to (0.1, 0.8) it overlaps the first row, so the second place is in its range.
    rows = [(0.9, 0.7, 0.95), (0.8, 0.1, 0.2)]
    assert rank_ranges(rows) == [(1, 2), (1, 2)]
    assert tied_with_above(rows) == [False, True]


def test_empty_board() -> None:
    assert rank_ranges([]) == []
    assert tied_with_above([]) == []
