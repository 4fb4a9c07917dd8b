"""The paired rule (issue 27): its coverage by simulation, and how many "≈ tied" marks it changes.

1. Simulation (no database). For each (items, shift) of ``SIMULATED``: items with a
   difficulty z ~ N(0, 1.5); an entry of ability θ hits item i with probability
   sigmoid(θ - z_i), independently per entry (the items are shared, the outcomes are not).
   ``TRIALS`` boards of two entries each:

   * equal abilities: the share of zero differences each rule calls tied (the paired rule's
     must be at least 95%);
   * abilities ``shift`` apart: the share of those known differences each rule detects.

   The metric is the hit rate, its interval the board's 95% percentile bootstrap
   (``DEFAULT_RESAMPLES`` resamples).
2. A generated board: ``BOARD_ENTRIES`` entries of abilities evenly spread over
   ``ABILITY_SPAN`` on the same items; "≈ tied" marks under the unpaired rule and the paired
   one, and the time of the paired marks at ``PAIRED_MAX_ROWS`` entries (the most a board's
   refresh tests).
3. The bundled boards: the demo (``demo_setup``: the bundled audit, probe and checklist data
   through the offline judge) is loaded into this throw-away database, then every board's
   paired marks are computed; printed per board: ranked rows, pairs tested, ties before and
   after.
"""

from __future__ import annotations

import io
import time
from typing import TextIO

import numpy as np
import numpy.typing as npt
from django.core.management import call_command

from scoring.stats import DEFAULT_LEVEL, DEFAULT_RESAMPLES
from scoring.stats.bootstrap import span_rank_ranges, span_ties
from scoring.stats.paired import (
    PairedEntry,
    expanded_level,
    paired_distributions,
    paired_marks,
)

ITEMS = 200
# 4,000 trials put the Monte-Carlo standard error of a 95% share near 0.35 points, small
# enough to tell a rule at 95% from one at 94% (1,000 trials left 0.7 points).
TRIALS = 4000
# (items, ability shift of the known difference): a checklist's 15 questions, a small probe
# suite, a release's truth findings.
SIMULATED = ((15, 1.5), (50, 0.8), (200, 0.4))
BOARD_ENTRIES = 12
ABILITY_SPAN = 5.0
SEED = 27


def _hits(
    rng: np.random.Generator, difficulty: npt.NDArray[np.float64], ability: float
) -> npt.NDArray[np.float64]:
    p = 1.0 / (1.0 + np.exp(-(ability - difficulty)))
    return (rng.random(len(difficulty)) < p).astype(np.float64)


def _entry(hits: npt.NDArray[np.float64]) -> PairedEntry:
    n = len(hits)
    return PairedEntry(hits, lambda sums: sums[:, 0] / n)


def _verdicts(rng: np.random.Generator, shift: float, items: int) -> tuple[int, int]:
    """Over ``TRIALS`` two-entry boards: (paired rule separated, unpaired rule separated)."""
    paired = unpaired = 0
    tail = (1.0 - expanded_level(DEFAULT_LEVEL, items)) / 2.0
    for _ in range(TRIALS):
        difficulty = rng.normal(0.0, 1.5, items)
        a, b = _entry(_hits(rng, difficulty, shift)), _entry(_hits(rng, difficulty, 0.0))
        seed = int(rng.integers(0, 2**31))
        values, draws = paired_distributions([a, b], resamples=DEFAULT_RESAMPLES, seed=seed)
        lows = np.minimum(np.quantile(draws, 0.025, axis=1), values)
        highs = np.maximum(np.quantile(draws, 0.975, axis=1), values)
        unpaired += int(not (lows[0] <= highs[1] and lows[1] <= highs[0]))
        # What paired_difference(a, b) gives, from the same draws.
        low, high = np.quantile(draws[0] - draws[1], [tail, 1.0 - tail])
        paired += int(low > 0 or high < 0)
    return paired, unpaired


def _simulation(out: TextIO) -> None:
    rng = np.random.default_rng(SEED)
    out.write(
        f"simulation: {TRIALS} boards of 2 entries per case, items shared, outcomes drawn "
        f"independently per entry, {DEFAULT_RESAMPLES} resamples\n"
    )
    for items, shift in SIMULATED:
        started = time.perf_counter()
        zero_paired, zero_unpaired = _verdicts(rng, 0.0, items)
        known_paired, known_unpaired = _verdicts(rng, shift, items)
        tied = 1 - zero_paired / TRIALS
        error = (tied * (1 - tied) / TRIALS) ** 0.5
        out.write(
            f"  {items} items: zero difference called tied: paired "
            f"{tied:.1%} ± {error:.1%} (target >= 95%), unpaired overlap "
            f"{1 - zero_unpaired / TRIALS:.1%}; known difference (ability +{shift}) "
            f"detected: paired {known_paired / TRIALS:.1%}, unpaired overlap "
            f"{known_unpaired / TRIALS:.1%} ({time.perf_counter() - started:.0f}s)\n"
        )


def _generated(out: TextIO) -> None:
    from benchmarks_app.services.paired import PAIRED_MAX_ROWS

    rng = np.random.default_rng(SEED + 1)
    for entries in (BOARD_ENTRIES, PAIRED_MAX_ROWS):
        difficulty = rng.normal(0.0, 1.5, ITEMS)
        abilities = np.linspace(ABILITY_SPAN / 2, -ABILITY_SPAN / 2, entries)
        board = [_entry(_hits(rng, difficulty, float(a))) for a in abilities]
        started = time.perf_counter()
        values, draws = paired_distributions(board, resamples=DEFAULT_RESAMPLES, seed=0)
        order = np.argsort(-values, kind="stable")
        values, draws = values[order], draws[order]
        lows = np.minimum(np.quantile(draws, 0.025, axis=1), values)
        highs = np.maximum(np.quantile(draws, 0.975, axis=1), values)
        marks = paired_marks(draws, values=values, lows=lows, highs=highs, items=ITEMS)
        took = time.perf_counter() - started
        before = int(span_ties(lows, highs).sum())
        after = int(marks.tied_with_above.sum())
        best, worst = span_rank_ranges(lows, highs)
        width_u = float(np.mean(worst - best))
        width_p = float(np.mean(marks.rank_high - marks.rank_low))
        out.write(
            f"generated board: {entries} entries x {ITEMS} items, abilities over "
            f"{ABILITY_SPAN}: '≈ tied' marks {before} unpaired -> {after} paired "
            f"({before - after} changed); {marks.tested_pairs} pairs tested, "
            f"{marks.split_pairs} split; mean rank-range width {width_u:.1f} unpaired -> "
            f"{width_p:.1f} paired; "
            f"paired marks computed in {took:.2f}s\n"
        )


def _bundled(out: TextIO) -> None:
    from benchmarks_app.services.paired import paired_refresh_all

    started = time.perf_counter()
    call_command("demo_setup", stdout=io.StringIO())
    out.write(f"bundled boards (demo_setup, {time.perf_counter() - started:.0f}s to load):\n")
    changed = 0
    for result in paired_refresh_all():
        changed += result.ties_unpaired - result.ties_paired
        out.write(
            f"  {result.board}: {result.ranked} ranked, {result.tested_pairs} pair(s) tested, "
            f"'≈ tied' {result.ties_unpaired} unpaired -> {result.ties_paired} paired\n"
        )
    out.write(f"  '≈ tied' marks changed on the bundled boards: {changed}\n")


def run(out: TextIO) -> None:
    _simulation(out)
    _generated(out)
    _bundled(out)
