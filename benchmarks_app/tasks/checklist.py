"""django-q2 entry point of checklist assessment runs."""

from __future__ import annotations

from benchmarks_app.services.runs import process_run


def process_checklist_run(run_id: int) -> None:
    from benchmarks_app.services.checklist import process_checklist

    process_run(run_id=run_id, processor=process_checklist)
