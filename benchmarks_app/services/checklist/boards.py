"""Checklist board rows (``ChecklistBoardRow``): one per team and board."""

from __future__ import annotations

from benchmarks_app.models import EvaluationRun


def checklist_board_refresh_for_run(*, run: EvaluationRun) -> None:
    """Rewrite the rows of the board(s) ``run`` belongs to (placeholder until implemented)."""
