"""Writes of the paper checklist challenge: teams, submissions under quota, assessment runs."""

from __future__ import annotations

from benchmarks_app.services.checklist.assessment import process_checklist
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
    checklist_submission_assess,
    checklist_submission_create,
    checklist_submission_discard,
)
from benchmarks_app.services.checklist.teams import (
    checklist_membership_add,
    checklist_team_create,
    team_create,
    team_join,
)

__all__ = [
    "ChecklistSubmissionError",
    "NotAllowed",
    "PaperUpload",
    "QuotaExceeded",
    "TeamError",
    "checklist_extract_upload",
    "checklist_import_assessed",
    "checklist_membership_add",
    "checklist_paper_assess_for_maintainers",
    "checklist_submission_assess",
    "checklist_submission_create",
    "checklist_submission_discard",
    "checklist_team_create",
    "process_checklist",
    "read_upload",
    "team_create",
    "team_join",
]
