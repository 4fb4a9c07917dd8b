"""Whole-dataset submissions: a scanner's results for every repo of a dataset in one upload.

One upload (a zip of ``<project_id>_results.json`` files, or one JSON object
``{project_id: findings}``) makes one run over the dataset's release and counts as one
submission against the daily limit. Every repo of the release needs findings, unless the
participant declares that the tool found nothing there (``declared_empty``); a repo missing
from the upload, or with an empty list, is an error naming it. The same checks as a per-repo
upload apply (scanner ownership, judge, quota, size and finding caps, JSON depth), and the
archive is checked before anything is unpacked (:mod:`scoring.audit.bundle`). A refused
upload stores nothing. As for one repo, the submission lands in the release's open phase,
findings without title and description need ``confirm_untitled``, it may carry a method
(name, description, link), and an upload identical to what a live run already judges is
answered with :class:`.submissions.AuditUnchanged` and costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from benchmarks_app.db_retry import retry_on_conflict
from benchmarks_app.models import EvaluationRun
from benchmarks_app.models.audit import AuditDataset
from benchmarks_app.selectors.audit_boards import published_release, release_repos
from benchmarks_app.services.audit.boards import audit_boards_refresh_for_scanners
from benchmarks_app.services.audit.importing import ImportReport, import_scan_file
from benchmarks_app.services.audit.runs import AuditRunError, audit_run_create, entry_metadata
from benchmarks_app.services.audit.submissions import (
    NAME_NOT_AVAILABLE,
    AuditUnchanged,
    _check_daily_quota,
    _max_findings,
    _refuse_scanner_name,
    _submit_findings,
    _submit_judge,
    _submit_scanner_name,
    submission_phase,
    unchanged_run,
)
from benchmarks_app.services.uploads import upload_max_bytes, upload_too_large
from scoring.audit.bundle import read_bundle
from scoring.audit.parsing import ParseError, ScanFile, ScanRecord

# The archive may unpack to this many times the upload limit in all (JSON compresses well).
UNPACKED_FACTOR = 5
_SEPARATORS = re.compile(r"[\s,]+")


def parse_declared_empty(value: Any) -> list[str]:
    """Project ids from a list, or from text separated by commas or spaces."""
    if value is None or value is False:
        return []
    items = value if isinstance(value, list | tuple) else [value]
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise AuditRunError("declared_empty: expected project ids (a list, or text)")
        out += [p for p in _SEPARATORS.split(item.strip()) if p]
    return out


def _short(ids: list[str], limit: int = 20) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


@retry_on_conflict
@transaction.atomic
def audit_dataset_submit(
    *,
    user: Any,
    scanner_name: str,
    dataset: AuditDataset,
    results: dict[str, Any],
    declared_empty: Iterable[str] = (),
    judge: str | None = None,
    source_name: str = "api upload",
    field: str = "results",
    confirm_untitled: bool = False,
    method_name: str = "",
    method_description: str = "",
    method_url: str = "",
) -> EvaluationRun:
    """Store a scanner's results for every repo of ``dataset``'s release and queue one run.

    ``results`` maps project ids to decoded findings (any accepted shape). Raises
    :class:`AuditRunError` (``"field: problem"``) and :class:`PermissionError` as
    :func:`.submissions.audit_scan_submit` does.
    """
    name = _submit_scanner_name(user=user, scanner_name=scanner_name)
    judge = _submit_judge(user=user, judge=judge)
    method = entry_metadata(
        method_name=method_name, method_description=method_description, method_url=method_url
    )
    release = published_release(dataset)
    if release is None:
        raise AuditRunError(f"dataset: {dataset.slug} has no published release yet")
    phase = submission_phase(release)
    repos = {r.project_id: r for r in release_repos(release)}
    declared = set(parse_declared_empty(list(declared_empty)))
    if unknown := sorted(declared - set(repos)):
        raise AuditRunError(f"declared_empty: {_short(unknown)} not in {release}")
    if unknown := sorted(set(results) - set(repos)):
        raise AuditRunError(
            f"{field}: {_short(unknown)} not in {release} (its repos: {_short(sorted(repos))})"
        )
    if missing := sorted(set(repos) - set(results) - declared):
        raise AuditRunError(
            f"{field}: no findings for repo(s) {_short(missing)}; upload them, or, if your tool "
            "found nothing there, declare them empty (declared_empty)"
        )
    parsed: dict[str, tuple[list[ScanRecord], dict[str, Any]]] = {}
    for project_id, repo in sorted(repos.items()):
        if project_id not in results:
            parsed[project_id] = ([], {})
            continue
        parsed[project_id] = _submit_findings(
            results[project_id],
            where=f"{field}: {project_id}",
            repo=repo,
            declared_empty=project_id in declared,
            confirm_untitled=confirm_untitled,
        )
    total = sum(len(findings) for findings, _ in parsed.values())
    cap = _max_findings()
    if cap is not None and total > cap:
        raise AuditRunError(f"{field}: {total} findings in all; at most {cap} are accepted at once")
    if not getattr(user, "is_authenticated", False):
        raise PermissionError("sign in to submit results")
    # Only now, the upload checked: a bad one answers the same under any name.
    _refuse_scanner_name(user=user, name=name)
    same = unchanged_run(
        scanner_name=name,
        findings={repos[p]: findings for p, (findings, _) in parsed.items()},
        judge=judge,
        release=release,
        phase=phase,
    )
    if same is not None:
        raise AuditUnchanged(same)
    _check_daily_quota(user, phase)
    report = ImportReport()
    scanner = None
    for project_id, (findings, metadata) in parsed.items():
        result = import_scan_file(
            ScanFile(name, project_id, f"{source_name}:{project_id}"[:300], findings, metadata),
            repos[project_id],
            report,
            owner=user,
            declared_empty=project_id in declared,
        )
        scanner = result.scanner
    assert scanner is not None  # a release has at least one repo
    if scanner.owner_id != getattr(user, "pk", None) and not getattr(user, "is_staff", False):
        # Someone else created the name between the check and the insert: undo it all.
        raise PermissionError(f"scanner: {name!r} {NAME_NOT_AVAILABLE}")
    if report.changed_scanner_ids:
        audit_boards_refresh_for_scanners(scanner_ids=report.changed_scanner_ids)
    return audit_run_create(
        scanner=scanner,
        repos=[repos[p] for p in sorted(repos)],
        judge=judge,
        created_by=user,
        release=release,
        phase=phase,
        metadata=method,
    )


@retry_on_conflict
@transaction.atomic
def audit_dataset_upload(
    *,
    user: Any,
    scanner_name: str,
    dataset: AuditDataset,
    upload: UploadedFile,
    declared_empty: Iterable[str] = (),
    judge: str | None = None,
    confirm_untitled: bool = False,
    method_name: str = "",
    method_description: str = "",
    method_url: str = "",
) -> EvaluationRun:
    """:func:`audit_dataset_submit` for an uploaded zip or JSON file (web form, multipart);
    problems with the file are reported under ``file`` and name it."""
    file_name = upload.name or "upload"
    too_large = upload_too_large(upload.size, file_name)
    if too_large:
        raise AuditRunError(f"file: {too_large}")
    limit = upload_max_bytes()
    try:
        results = read_bundle(
            upload.read(), max_member_bytes=limit, max_total_bytes=UNPACKED_FACTOR * limit
        )
    except ParseError as exc:
        raise AuditRunError(f"file: {file_name}: {exc}") from None
    return audit_dataset_submit(
        user=user,
        scanner_name=scanner_name,
        dataset=dataset,
        results=results,
        declared_empty=declared_empty,
        judge=judge,
        source_name=file_name,
        field="file",
        confirm_untitled=confirm_untitled,
        method_name=method_name,
        method_description=method_description,
        method_url=method_url,
    )
