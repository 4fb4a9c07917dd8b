"""Several allowances on the same events (an hour's and 10 minutes'): counted together, the one
that refuses is the one named, and a refused take counts nothing."""

from __future__ import annotations

from benchmarks_app.rate_limits import (
    Allowance,
    allowances_count,
    allowances_spent,
    allowances_take,
)

HOUR = Allowance(5, 3600, "this hour")
TEN_MINUTES = Allowance(2, 600, "in the last 10 minutes")


def test_the_shorter_window_refuses_first_and_a_refusal_counts_nothing() -> None:
    both = [HOUR, TEN_MINUTES]
    assert allowances_take(key="k", allowances=both) is None
    assert allowances_take(key="k", allowances=both) is None
    refused = allowances_take(key="k", allowances=both)
    assert refused is not None
    allowance, wait = refused
    assert allowance is TEN_MINUTES and 1 <= wait <= 600
    # Two events counted in each window, the refused third in neither.
    assert allowances_spent(key="k", allowances=[HOUR]) is None
    assert allowances_take(key="k", allowances=[HOUR]) is None  # the hour has room: 3 of 5
    assert allowances_take(key="k", allowances=[HOUR]) is None
    assert allowances_take(key="k", allowances=[HOUR]) is None
    spent = allowances_spent(key="k", allowances=both)
    # Both are spent now; the longer wait (the hour's) is the one to tell.
    assert spent is not None and spent[0] is HOUR


def test_counting_goes_to_every_window_and_keys_stay_apart() -> None:
    allowances_count(key="a", allowances=[HOUR, TEN_MINUTES])
    allowances_count(key="a", allowances=[HOUR, TEN_MINUTES])
    spent = allowances_spent(key="a", allowances=[HOUR, TEN_MINUTES])
    assert spent is not None and spent[0] is TEN_MINUTES
    assert allowances_spent(key="b", allowances=[HOUR, TEN_MINUTES]) is None
    # The hour's count keeps the key it had before the shorter window came.
    assert HOUR.key("a") == "a" and TEN_MINUTES.key("a") == "a:600s"
