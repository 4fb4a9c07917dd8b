"""Queue entry point of the checklist benchmark, kept for tasks queued before runs had pieces."""

from __future__ import annotations

from benchmarks_app.services.runs import run_process_all


def process_checklist_run(run_id: int) -> None:
    run_process_all(run_id=run_id)
