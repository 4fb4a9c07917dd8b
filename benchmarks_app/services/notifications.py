"""E-mail and webhook notifications when a run ends."""

from __future__ import annotations


def run_end_notify(*, run_id: int) -> None:
    """Enqueue the e-mail and webhook deliveries for run ``run_id`` (placeholder)."""
