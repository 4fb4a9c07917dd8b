"""The audit board's interval (truth findings resampled), ranks, ties and rank ranges."""

from __future__ import annotations

import numpy as np
import pytest

from scoring.audit.board import (
    BoardEntry,
    f1_with_partial_interval,
    f1_with_partial_of_sums,
    f1_with_partial_statistic,
    rank_board,
    truth_units,
)
from scoring.audit.metrics import overall, repo_metrics
from scoring.stats.bootstrap import bootstrap_interval


def row(repo: str, *, truth: int, scan: int, qa: int, tp: int, partial: int = 0) -> dict:
    return repo_metrics(
        repo=repo,
        truth_severities=["High"] * truth,
        scan_severities=["High"] * (scan - qa) + ["Info"] * qa,
        tp=tp,
        partial=partial,
    )


def test_units_carry_outcomes_and_each_repos_reported_share() -> None:
    rows = [
        row("a", truth=2, scan=3, qa=1, tp=1),
        row("b", truth=1, scan=0, qa=0, tp=0),
        row("c", truth=0, scan=2, qa=0, tp=0),  # no truth finding: its findings stay fixed
    ]
    units = truth_units(rows)
    assert units.matrix.tolist() == [[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]]
    assert units.fixed_reported == 2.0
    # On the full sample the statistic is the board's own number: P+ = 1/4, R+ = 1/3.
    sums = units.matrix.sum(axis=0, keepdims=True)
    value = f1_with_partial_of_sums(sums, units=3, fixed_reported=units.fixed_reported)[0]
    assert value == pytest.approx(2 / 7)  # 2PR / (P + R) = (1/6) / (7/12)
    assert value == pytest.approx(overall(rows)["f1_with_partial"])


def test_interval_computed_by_hand() -> None:
    # One hit and one miss, one reported finding each: a resample of two units holds k hits
    # (k = 0, 1, 2 with probabilities 1/4, 1/2, 1/4), so P+ = R+ = F1+ = k/2. The 2.5% and
    # 97.5% quantiles of 2,000 draws are therefore 0 and 1.
    rows = [row("a", truth=2, scan=2, qa=0, tp=1)]
    interval = f1_with_partial_interval(rows, resamples=2000, seed=7)
    assert interval is not None
    assert (interval.low, interval.high, interval.level, interval.resamples) == (
        0.0,
        1.0,
        0.95,
        2000,
    )
    # Every unit alike: no spread at all.
    same = f1_with_partial_interval([row("a", truth=4, scan=8, qa=0, tp=4)], resamples=1000)
    assert same is not None and same.low == same.high == pytest.approx(2 * 0.5 / 1.5)


def test_same_seed_same_interval_and_the_plain_statistic_agrees() -> None:
    rows = [
        row("a", truth=12, scan=30, qa=4, tp=3, partial=2),
        row("b", truth=7, scan=9, qa=0, tp=2),
    ]
    first = f1_with_partial_interval(rows, seed=3)
    second = f1_with_partial_interval(rows, seed=3)
    other = f1_with_partial_interval(rows, seed=4)
    assert first == second and first != other
    assert first is not None and first.low < overall(rows)["f1_with_partial"] < first.high
    units = truth_units(rows)
    plain = bootstrap_interval(
        [tuple(u) for u in units.matrix.tolist()],
        f1_with_partial_statistic(units),
        resamples=2000,
        seed=3,
    )
    assert plain is not None
    assert (plain.low, plain.high) == pytest.approx((first.low, first.high))


def test_no_truth_findings_no_interval() -> None:
    assert f1_with_partial_interval([row("c", truth=0, scan=3, qa=0, tp=0)]) is None
    assert np.asarray(truth_units([]).matrix).shape == (0, 2)


def entry(name: str, value: float, ci: tuple[float, float], *, complete: bool = True) -> BoardEntry:
    return BoardEntry(
        scanner=name,
        complete=complete,
        repos_evaluated=11 if complete else 3,
        f1_with_partial=value,
        f1=value / 2,
        ci=ci,
    )


def test_equal_numbers_share_a_rank_and_incomplete_rows_are_not_ranked() -> None:
    board = rank_board(
        [
            entry("partial", 0.9, (0.8, 1.0), complete=False),
            entry("b-twin", 0.4, (0.3, 0.5)),
            entry("a-twin", 0.4, (0.3, 0.5)),
            entry("best", 0.7, (0.6, 0.8)),
            entry("close", 0.38, (0.28, 0.45)),
            entry("far", 0.1, (0.05, 0.15)),
        ]
    )
    assert [e.scanner for e in board] == ["best", "a-twin", "b-twin", "close", "far", "partial"]
    assert [e.rank for e in board] == [1, 2, 2, 4, 5, None]
    ranges = [(e.rank_low, e.rank_high) for e in board]
    assert ranges == [(1, 1), (2, 4), (2, 4), (2, 4), (5, 5), (None, None)]
    assert [e.tied_with_above for e in board] == [False, False, True, True, False, False]
