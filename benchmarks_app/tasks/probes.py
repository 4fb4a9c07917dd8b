"""Queue entry point of the safety-probe benchmark."""

from __future__ import annotations

from benchmarks_app.services.probes import probe_run_process
from benchmarks_app.services.runs import process_run


def process_probe_run(run_id: int) -> None:
    process_run(run_id=run_id, processor=probe_run_process)
