"""What a run's judge calls cost: calls, tokens, latency and, where prices are set, money.

Pure arithmetic over the ledger's figures, shared by the run page, the runs API and the
``--wait`` output of the commands, so that all three say the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

# What a cached input token costs, as a share of an uncached one, where no cached price is set:
# OpenAI bills cached input at half the price or less (a half on the GPT-4o family, a quarter
# or a tenth on later models), so a half never underestimates.
CACHED_INPUT_SHARE = 0.5


@dataclass(frozen=True)
class JudgeUsage:
    calls_new: int
    calls_cached: int
    tokens_in: int
    tokens_out: int
    tokens_reasoning: int
    # Of tokens_in, those the server read from its prompt cache (where it says).
    tokens_cached: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    # None unless a price is configured (JUDGE_PRICE_IN_PER_MTOK, ..._OUT_PER_MTOK); cached
    # input at JUDGE_PRICE_CACHED_IN_PER_MTOK.
    cost_estimate: float | None

    @property
    def cached_share(self) -> float | None:
        """The share of the prompt tokens served from the server's cache; None for none sent."""
        return round(self.tokens_cached / self.tokens_in, 4) if self.tokens_in else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cached_share": self.cached_share}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeUsage:
        """Back from :meth:`as_dict` (its derived figures are computed again)."""
        optional = {"latency_p50_ms", "latency_p95_ms", "cost_estimate"}
        values: dict[str, Any] = {
            f.name: data.get(f.name, None if f.name in optional else 0) for f in fields(cls)
        }
        return cls(**values)

    def line(self) -> str:
        """One line for a terminal or a page."""
        parts = [
            f"judge calls: {self.calls_new} new, {self.calls_cached} cached",
            f"tokens: {self.tokens_in:,} in"
            + (f" ({self.tokens_cached:,} cached)" if self.tokens_cached else "")
            + f", {self.tokens_out:,} out"
            + (f" ({self.tokens_reasoning:,} reasoning)" if self.tokens_reasoning else ""),
        ]
        if self.latency_p50_ms is not None and self.latency_p95_ms is not None:
            parts.append(
                f"latency p50 {_seconds(self.latency_p50_ms)}, p95 {_seconds(self.latency_p95_ms)}"
            )
        if self.cost_estimate is not None:
            parts.append(f"estimated cost ${self.cost_estimate:,.4f}")
        return "; ".join(parts)


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f} s"


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by the nearest-rank method; ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def judge_usage(
    *,
    calls_new: int,
    calls_cached: int,
    tokens_in: int,
    tokens_out: int,
    tokens_reasoning: int,
    latencies_ms: Sequence[float],
    tokens_cached: int = 0,
    price_in_per_mtok: float = 0.0,
    price_out_per_mtok: float = 0.0,
    price_cached_in_per_mtok: float | None = None,
) -> JudgeUsage:
    """The summary; the cost counts reasoning tokens as output (as providers bill them), and
    cached input tokens at ``price_cached_in_per_mtok`` (unset: :data:`CACHED_INPUT_SHARE` of
    the input price)."""
    tokens_cached = min(tokens_cached, tokens_in)
    cost = None
    if price_in_per_mtok > 0 or price_out_per_mtok > 0:
        cached_price = (
            price_in_per_mtok * CACHED_INPUT_SHARE
            if price_cached_in_per_mtok is None
            else price_cached_in_per_mtok
        )
        cost = round(
            (tokens_in - tokens_cached) / 1e6 * price_in_per_mtok
            + tokens_cached / 1e6 * cached_price
            + tokens_out / 1e6 * price_out_per_mtok,
            6,
        )
    p50, p95 = percentile(latencies_ms, 50), percentile(latencies_ms, 95)
    return JudgeUsage(
        calls_new=calls_new,
        calls_cached=calls_cached,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        tokens_reasoning=tokens_reasoning,
        tokens_cached=tokens_cached,
        latency_p50_ms=round(p50, 1) if p50 is not None else None,
        latency_p95_ms=round(p95, 1) if p95 is not None else None,
        cost_estimate=cost,
    )
