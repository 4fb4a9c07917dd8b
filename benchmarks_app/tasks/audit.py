"""Queue entry point of the audit benchmark."""

from __future__ import annotations

from benchmarks_app.services.audit import audit_process_run
from benchmarks_app.services.runs import process_run


def process_audit_run(run_id: int) -> None:
    """Match a run's scanner findings against ground truth (resumable; see services.audit)."""
    process_run(run_id=run_id, processor=audit_process_run)
