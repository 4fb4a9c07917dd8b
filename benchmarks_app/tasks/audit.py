"""Queue entry point of the audit benchmark, kept for tasks queued before runs had pieces."""

from __future__ import annotations

from benchmarks_app.services.runs import run_process_all


def process_audit_run(run_id: int) -> None:
    """Process every piece of an audit run here (new runs send one task per repo instead)."""
    run_process_all(run_id=run_id)
