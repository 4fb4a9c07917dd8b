"""Curation admin, one module per benchmark. Side effects go through services."""

from __future__ import annotations

from benchmarks_app.admin import (
    audit,
    checklist,
    judge_calls,
    judges,
    notifications,
    phases,
    probes,
    runs,
    verdicts,
)

__all__ = [
    "audit",
    "checklist",
    "judge_calls",
    "judges",
    "notifications",
    "phases",
    "probes",
    "runs",
    "verdicts",
]
