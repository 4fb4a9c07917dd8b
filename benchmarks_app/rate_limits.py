"""Rates that hold across processes: counts in the shared cache (``config.env.caches``).

Every limit of the site on how often a client may do something (the API throttles, the login
form, paper reads that store nothing) counts here. The cache is Redis or the database, shared
by every web and queue process and kept across restarts, and its increment is atomic on both
(``benchmarks_app.cache_backends``), so N processes serving one client at once count N.

A rate is a count per window of its duration plus the previous window's count weighted by how
much of that window still lies within one duration of now (a sliding window: a client cannot
spend two allowances across a window's boundary). A refused request is not counted.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from django.core.cache import cache


def rate_take(*, key: str, limit: int, duration_s: int, now: float | None = None) -> float | None:
    """Count one event under ``key`` if it fits ``limit`` per ``duration_s``: None when it did,
    else the seconds (whole, 1 to ``duration_s``) until one more would fit."""
    now = time.time() if now is None else now
    window = int(now // duration_s)
    elapsed = now - window * duration_s
    current_key = f"rate:{key}:w{window}"
    previous = int(cache.get(f"rate:{key}:w{window - 1}", 0))
    # Kept through the next window, where it is the weighted previous count.
    cache.add(current_key, 0, 2 * duration_s + 1)
    try:
        current = int(cache.incr(current_key))
    except ValueError:  # expired between add() and incr(): only on a clock jump
        cache.add(current_key, 1, 2 * duration_s + 1)
        current = 1
    if previous * (1.0 - elapsed / duration_s) + current <= limit:
        return None
    cache.decr(current_key)
    return _wait_s(previous, current - 1, limit, duration_s, elapsed)


def rate_spent(*, key: str, limit: int, duration_s: int, now: float | None = None) -> float | None:
    """Like :func:`rate_take` without counting: None while one more event would fit."""
    now = time.time() if now is None else now
    window = int(now // duration_s)
    elapsed = now - window * duration_s
    counts = cache.get_many([f"rate:{key}:w{window - 1}", f"rate:{key}:w{window}"])
    previous = int(counts.get(f"rate:{key}:w{window - 1}", 0))
    current = int(counts.get(f"rate:{key}:w{window}", 0))
    if previous * (1.0 - elapsed / duration_s) + current + 1 <= limit:
        return None
    return _wait_s(previous, current, limit, duration_s, elapsed)


def rate_count(*, key: str, duration_s: int, now: float | None = None) -> None:
    """Count one event under ``key`` whatever the limit (one already let through)."""
    now = time.time() if now is None else now
    current_key = f"rate:{key}:w{int(now // duration_s)}"
    cache.add(current_key, 0, 2 * duration_s + 1)
    try:
        cache.incr(current_key)
    except ValueError:
        cache.add(current_key, 1, 2 * duration_s + 1)


@dataclass(frozen=True)
class Allowance:
    """``limit`` events per ``duration_s``, one of several that bound the same events: an
    hour's allowance and a shorter one, so that a client cannot spend the hour's in its first
    minute (issue 35: three hostile accounts did, 150 bad files read in their first minutes)."""

    limit: int
    duration_s: int
    wording: str  # "this hour", "in the last 10 minutes": what a refusal tells the client

    def key(self, key: str) -> str:
        # The hour's counts keep the key they always had; a shorter window gets its own.
        return key if self.duration_s == 3600 else f"{key}:{self.duration_s}s"


def allowances_spent(*, key: str, allowances: list[Allowance]) -> tuple[Allowance, float] | None:
    """The allowance that refuses one more event under ``key`` and the seconds until it would
    not (the longest wait of those spent); None while every one has room. Counts nothing."""
    spent = [
        (allowance, wait)
        for allowance in allowances
        if (wait := rate_spent(key=allowance.key(key), limit=allowance.limit,
                               duration_s=allowance.duration_s)) is not None
    ]  # fmt: skip
    return max(spent, key=lambda found: found[1]) if spent else None


def allowances_count(*, key: str, allowances: list[Allowance]) -> None:
    """Count one event under ``key`` in every allowance (one already let through)."""
    for allowance in allowances:
        rate_count(key=allowance.key(key), duration_s=allowance.duration_s)


def allowances_take(*, key: str, allowances: list[Allowance]) -> tuple[Allowance, float] | None:
    """Count one event under ``key`` if every allowance has room: None when it did, else the
    allowance that refused and its wait. Each allowance's take is atomic; only two requests
    racing between the look and the takes can leave one count in an allowance taken before
    another refused (an overcount, never an event past a limit)."""
    spent = allowances_spent(key=key, allowances=allowances)
    if spent is not None:
        return spent
    for allowance in allowances:
        wait = rate_take(
            key=allowance.key(key), limit=allowance.limit, duration_s=allowance.duration_s
        )
        if wait is not None:
            return allowance, wait
    return None


def rate_parse(rate: str) -> tuple[int, int]:
    """``"120/min"`` -> (120, 60), as DRF reads its throttle rates (s, m, h, d)."""
    count, _, period = rate.partition("/")
    durations = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if not count.strip().isdigit() or not period or period.strip()[0] not in durations:
        raise ValueError(f"rate {rate!r} is not COUNT/PERIOD (e.g. 120/min)")
    return int(count), durations[period.strip()[0]]


def _wait_s(previous: int, current: int, limit: int, duration_s: int, elapsed: float) -> float:
    """Seconds until one more event fits beside ``current`` in this window and ``previous``
    in the last one, at most the rate's duration."""
    if current + 1 <= limit and previous > 0:
        wait = duration_s * (1.0 - (limit - current - 1) / previous) - elapsed
    else:
        fits_at = duration_s * (1.0 - (limit - 1) / current) if current else 0.0
        wait = duration_s - elapsed + max(0.0, fits_at)
    return float(min(duration_s, max(1, math.ceil(wait))))


__all__ = [
    "Allowance",
    "allowances_count",
    "allowances_spent",
    "allowances_take",
    "rate_count",
    "rate_parse",
    "rate_spent",
    "rate_take",
]
