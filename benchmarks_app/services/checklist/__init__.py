"""Writes of the paper checklist challenge: teams, submissions under quota, assessment runs."""

from __future__ import annotations

from benchmarks_app.services.checklist.assessment import process_checklist
from benchmarks_app.services.checklist.boards import (
    checklist_board_refresh,
    checklist_board_refresh_for_run,
    checklist_boards_refresh_all,
    checklist_boards_refresh_for_team,
)
from benchmarks_app.services.checklist.errors import (
    ChecklistSubmissionError,
    NotAllowed,
    QuotaExceeded,
    TeamError,
)
from benchmarks_app.services.checklist.importing import checklist_import_assessed
from benchmarks_app.services.checklist.maintainers import checklist_paper_assess_for_maintainers
from benchmarks_app.services.checklist.papers import (
    PaperUpload,
    checklist_extract_upload,
    read_upload,
)
from benchmarks_app.services.checklist.submissions import (
    PhaseNotOpen,
    checklist_submission_assess,
    checklist_submission_choose,
    checklist_submission_create,
    checklist_submission_discard,
    checklist_submission_unchoose,
)
from benchmarks_app.services.checklist.teams import (
    checklist_membership_add,
    checklist_team_create,
    team_create,
    team_flags_set,
    team_invite_rotate,
    team_join,
    team_leave,
    team_member_remove,
)

__all__ = [
    "ChecklistSubmissionError",
    "NotAllowed",
    "PaperUpload",
    "PhaseNotOpen",
    "QuotaExceeded",
    "TeamError",
    "checklist_board_refresh",
    "checklist_board_refresh_for_run",
    "checklist_boards_refresh_all",
    "checklist_boards_refresh_for_team",
    "checklist_extract_upload",
    "checklist_import_assessed",
    "checklist_membership_add",
    "checklist_paper_assess_for_maintainers",
    "checklist_submission_assess",
    "checklist_submission_choose",
    "checklist_submission_create",
    "checklist_submission_discard",
    "checklist_submission_unchoose",
    "checklist_team_create",
    "process_checklist",
    "read_upload",
    "team_create",
    "team_flags_set",
    "team_invite_rotate",
    "team_join",
    "team_leave",
    "team_member_remove",
]
