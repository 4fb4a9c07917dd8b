"""What a run's judge calls cost: calls, tokens, latency and, where prices are set, money.

Pure arithmetic over the ledger's figures, shared by the run page, the runs API and the
``--wait`` output of the commands, so that all three say the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class JudgeUsage:
    calls_new: int
    calls_cached: int
    tokens_in: int
    tokens_out: int
    tokens_reasoning: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    # None unless both prices are configured (JUDGE_PRICE_IN_PER_MTOK, ..._OUT_PER_MTOK).
    cost_estimate: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One line for a terminal or a page."""
        parts = [
            f"judge calls: {self.calls_new} new, {self.calls_cached} cached",
            f"tokens: {self.tokens_in:,} in, {self.tokens_out:,} out"
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
    price_in_per_mtok: float = 0.0,
    price_out_per_mtok: float = 0.0,
) -> JudgeUsage:
    """The summary; the cost counts reasoning tokens as output (as providers bill them)."""
    cost = None
    if price_in_per_mtok > 0 or price_out_per_mtok > 0:
        cost = round(tokens_in / 1e6 * price_in_per_mtok + tokens_out / 1e6 * price_out_per_mtok, 6)
    p50, p95 = percentile(latencies_ms, 50), percentile(latencies_ms, 95)
    return JudgeUsage(
        calls_new=calls_new,
        calls_cached=calls_cached,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        tokens_reasoning=tokens_reasoning,
        latency_p50_ms=round(p50, 1) if p50 is not None else None,
        latency_p95_ms=round(p95, 1) if p95 is not None else None,
        cost_estimate=cost,
    )
