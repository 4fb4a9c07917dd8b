"""Probe board rows (``ProbeBoardRow``): one per model and board, written when runs end."""

from __future__ import annotations

from benchmarks_app.models import EvaluationRun


def probe_board_refresh_for_run(*, run: EvaluationRun) -> None:
    """Rewrite the rows of the board(s) ``run`` belongs to (placeholder until implemented)."""
