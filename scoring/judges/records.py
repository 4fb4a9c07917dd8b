"""One ledger record per judge attempt, cache hits included: what each answer cost."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Recorder = Callable[["CallRecord"], None]


@dataclass
class CallRecord:
    judge: str
    model: str
    prompt_hash: str
    vote_number: int
    attempt: int
    latency_ms: float
    tokens_in: int
    tokens_out: int
    status: str  # "ok" | "cached" | "invalid" | "truncated" | "error"
    error: str = ""
