"""What follows a run's end, whatever its benchmark: its board, then who asked to be told.

Called by ``run_finish``, ``run_fail`` and ``run_cancel`` (``services.runs``). The board is
refreshed in the caller's transaction, so a board never shows a run as finished before its
row exists; notifications (e-mail, webhooks) are enqueued once the end commits, so a rolled
back end sends nothing.
"""

from __future__ import annotations

from django.db import transaction
from django.utils.module_loading import import_string

from benchmarks_app.models import Benchmark, EvaluationRun

# Audit boards are refreshed by ``audit_run_finish`` itself (one refresh per run, after the
# last repo); the other two benchmarks' boards are refreshed here.
BOARD_REFRESH: dict[str, str] = {
    Benchmark.PROBES: "benchmarks_app.services.probes.boards.probe_board_refresh_for_run",
    Benchmark.CHECKLIST: "benchmarks_app.services.checklist.boards.checklist_board_refresh_for_run",
}
NOTIFY = "benchmarks_app.services.notifications.run_end_notify"
# The paired marks are computed by a task after the board changed, never in the run's end.
PAIRED = "benchmarks_app.services.paired.paired_refresh_for_run"


def run_ended(*, run: EvaluationRun) -> None:
    """Refresh ``run``'s board now; notify its creator's channels once the end commits."""
    dotted = BOARD_REFRESH.get(run.benchmark)
    if dotted is not None:
        import_string(dotted)(run=run)
        import_string(PAIRED)(run=run)
    run_id = run.pk
    transaction.on_commit(lambda: import_string(NOTIFY)(run_id=run_id))
