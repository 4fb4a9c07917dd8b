"""Queue entry points of the run life cycle (all three benchmarks)."""

from __future__ import annotations

from benchmarks_app.services.paired import paired_sweep
from benchmarks_app.services.run_counts import run_counts_fold
from benchmarks_app.services.scheduling import piece_process
from benchmarks_app.services.sweeper import runs_sweep
from benchmarks_app.services.webhooks import deliveries_sweep


def process_run_piece(piece_id: int) -> None:
    """Process one piece of a run (an audit repo, or a whole probe or checklist run), and
    up to ``RUN_PIECES_PER_PROCESS - 1`` more queued pieces of the same run beside it."""
    piece_process(piece_id=piece_id)


def sweep_runs() -> str:
    """Re-queue what no live worker is doing (the schedule calls this every minute): run
    pieces, and webhook deliveries whose retry was lost or whose worker died mid-attempt;
    and ask for the paired marks of boards rewritten whole since (``paired_sweep``); fold
    the minute's run count changes (``run_counts_fold``: the home page sums them)."""
    overdue = deliveries_sweep()
    paired = paired_sweep()
    folded = run_counts_fold()
    return (
        f"{runs_sweep()}; {len(overdue)} overdue webhook delivery(ies) queued; "
        f"paired marks asked for {paired} board(s); {folded} run count row(s) folded"
    )
