"""Audit benchmark writes: importing data, submissions, creating and processing evaluation runs."""

from __future__ import annotations

from benchmarks_app.services.audit.importing import (
    ImportReport,
    audit_import_dataset,
    audit_import_path,
    audit_import_uploads,
    audit_scan_result_make_current,
)
from benchmarks_app.services.audit.processing import audit_process_run
from benchmarks_app.services.audit.runs import AuditRunError, audit_run_create
from benchmarks_app.services.audit.submissions import (
    AuditQuotaExceeded,
    audit_scan_submit,
    audit_scan_upload,
    participant_openai_allowed,
)

__all__ = [
    "AuditQuotaExceeded",
    "AuditRunError",
    "ImportReport",
    "audit_import_dataset",
    "audit_import_path",
    "audit_import_uploads",
    "audit_process_run",
    "audit_run_create",
    "audit_scan_result_make_current",
    "audit_scan_submit",
    "audit_scan_upload",
    "participant_openai_allowed",
]
