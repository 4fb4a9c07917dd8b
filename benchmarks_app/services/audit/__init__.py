"""Audit benchmark writes: importing data, datasets and releases, submissions, creating and
processing evaluation runs, and the boards written when a run ends."""

from __future__ import annotations

from benchmarks_app.services.audit.boards import (
    audit_board_refresh,
    audit_board_refresh_for_run,
    audit_board_update,
    audit_boards_refresh_all,
    audit_boards_refresh_for_release,
    audit_boards_refresh_for_scanners,
)
from benchmarks_app.services.audit.dataset_submissions import (
    audit_dataset_submit,
    audit_dataset_upload,
    parse_declared_empty,
)
from benchmarks_app.services.audit.datasets import (
    DatasetError,
    audit_dataset_get_or_create,
    audit_dataset_set_official_judge,
    audit_release_create,
    audit_release_make_official,
    audit_release_publish,
    audit_truth_finding_edit,
)
from benchmarks_app.services.audit.importing import (
    ImportReport,
    TruthConflict,
    audit_import_dataset,
    audit_import_path,
    audit_scan_result_make_current,
)
from benchmarks_app.services.audit.processing import audit_process_run
from benchmarks_app.services.audit.reevaluation import (
    ReleaseEvaluation,
    audit_release_evaluate_entries,
)
from benchmarks_app.services.audit.runs import (
    AuditRunError,
    audit_run_choose,
    audit_run_create,
    entry_metadata,
)
from benchmarks_app.services.audit.scanners import audit_scanner_describe
from benchmarks_app.services.audit.submissions import (
    AuditQuotaExceeded,
    AuditUnchanged,
    audit_scan_submit,
    audit_scan_upload,
    participant_openai_allowed,
)
from benchmarks_app.services.audit.uploads import audit_import_uploads

__all__ = [
    "AuditQuotaExceeded",
    "AuditRunError",
    "AuditUnchanged",
    "DatasetError",
    "ImportReport",
    "ReleaseEvaluation",
    "TruthConflict",
    "audit_board_refresh",
    "audit_board_refresh_for_run",
    "audit_board_update",
    "audit_boards_refresh_all",
    "audit_boards_refresh_for_release",
    "audit_boards_refresh_for_scanners",
    "audit_dataset_get_or_create",
    "audit_dataset_set_official_judge",
    "audit_dataset_submit",
    "audit_dataset_upload",
    "audit_import_dataset",
    "audit_import_path",
    "audit_import_uploads",
    "audit_process_run",
    "audit_release_create",
    "audit_release_evaluate_entries",
    "audit_release_make_official",
    "audit_release_publish",
    "audit_run_choose",
    "audit_run_create",
    "audit_scan_result_make_current",
    "audit_scan_submit",
    "audit_scan_upload",
    "audit_scanner_describe",
    "audit_truth_finding_edit",
    "entry_metadata",
    "parse_declared_empty",
    "participant_openai_allowed",
]
