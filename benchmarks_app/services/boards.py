"""Every stored board of the three benchmarks at once: rebuilding them from the results.

Board rows are derived from appended results, so they can always be rewritten: after an
upgrade that adds board tables (``migrate`` does it once, see ``apps.py``), or after a change
of how boards are computed (``manage.py rebuild_boards``).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks_app.models import (
    AuditRepoResult,
    ChecklistBoardRow,
    ChecklistScore,
    ProbeBoardRow,
    ProbeRunReport,
    ProbeSuite,
)
from benchmarks_app.models.audit import AuditBoardRow
from benchmarks_app.services.audit.boards import audit_boards_refresh_all
from benchmarks_app.services.checklist.boards import checklist_boards_refresh_all
from benchmarks_app.services.probes.boards import probe_board_refresh


@dataclass(frozen=True)
class BoardsRebuilt:
    audit: int
    probes: int
    checklist: int


def boards_rebuild() -> BoardsRebuilt:
    """Rewrite every board of every benchmark; how many boards (audit, checklist) or rows
    (probes) were written."""
    probes = sum(
        probe_board_refresh(suite=suite)
        for suite in ProbeSuite.objects.filter(submissions__reports__isnull=False).distinct()
    )
    return BoardsRebuilt(
        audit=audit_boards_refresh_all(),
        probes=probes,
        checklist=checklist_boards_refresh_all(),
    )


def boards_missing() -> bool:
    """Whether results exist that no board row shows yet (a database from before boards)."""
    return (
        (AuditRepoResult.objects.exists() and not AuditBoardRow.objects.exists())
        or (ProbeRunReport.objects.exists() and not ProbeBoardRow.objects.exists())
        or (ChecklistScore.objects.exists() and not ChecklistBoardRow.objects.exists())
    )
