"""Importing audit data: repos, ground truth and scanner results, idempotently.

Files are parsed by :mod:`scoring.audit.parsing`; a file that cannot be used is reported by
name and reason and skipped while the rest imports. Re-importing the same data changes
nothing. Truth findings missing from the files are kept (results reference them). A changed
truth finding is updated in place, or, when a published dataset release contains it, becomes
a new version that only later releases contain (:mod:`.datasets`). Fields a maintainer
edited in the admin since the last import are kept and reported as conflicts, unless
``overwrite``.

Importing into a dataset (``dataset``: a slug) adds the imported repos to it; a dataset
without a published release gets ``SLUG@1`` at once, published and official.

Scan results are versioned instead, because runs judged them: a scanner's file for a repo
whose normalized findings differ from the current version's becomes a new version, marked
current, and the earlier versions and their findings stay untouched, so every run can still
be reproduced and inspected. Findings identical to an earlier version make that version
current again; identical to the current one, they change nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Max

from benchmarks_app.models import Repo, ScanFinding, Scanner, ScanResult, TruthFinding
from benchmarks_app.services.audit.boards import audit_boards_refresh_for_scanners
from benchmarks_app.services.audit.datasets import (
    audit_dataset_add_repos,
    audit_dataset_get_or_create,
    dataset_slug_for_path,
    is_frozen,
    truth_finding_apply,
)
from benchmarks_app.services.uploads import upload_text_limits
from scoring.audit.folders import read_path
from scoring.audit.parsing import (
    DataSet,
    Problem,
    RepoRecord,
    ScanFile,
    ScanRecord,
    TruthRecord,
)


@dataclass(frozen=True)
class TruthConflict:
    """A field a maintainer edited that the file would change: kept unless ``overwrite``."""

    repo: str
    finding_id: str
    field: str
    yours: Any
    file: Any

    def __str__(self) -> str:
        return (
            f"{self.repo} {self.finding_id} {self.field}: yours {self.yours!r}, "
            f"the file's {self.file!r}"
        )


@dataclass
class ImportReport:
    files_read: int = 0
    repos_created: int = 0
    repos_updated: int = 0
    truth_created: int = 0
    truth_updated: int = 0
    truth_kept_missing: int = 0
    # Changed truth findings that a published release contains: new versions instead.
    truth_versioned: int = 0
    conflicts: list[TruthConflict] = field(default_factory=list)
    overwritten: list[TruthConflict] = field(default_factory=list)
    dataset: str = ""
    # The release this import created and published (the dataset had none yet).
    release_published: str = ""
    scanners_created: int = 0
    # First results of a scanner for a repo.
    scan_results_created: int = 0
    # Changed results: a new version, now current (earlier ones kept for their runs).
    scan_results_updated: int = 0
    # Results identical to an earlier version, which is current again.
    scan_results_restored: int = 0
    # Results identical to the current version.
    scan_results_unchanged: int = 0
    scan_findings_created: int = 0
    problems: list[Problem] = field(default_factory=list)
    scan_results: list[ScanResult] = field(default_factory=list)
    # Scanners whose current results changed: the boards they are on are rewritten.
    changed_scanner_ids: set[int] = field(default_factory=set)

    @property
    def changed(self) -> bool:
        return any(
            (
                self.repos_created,
                self.repos_updated,
                self.truth_created,
                self.truth_updated,
                self.scan_results_created,
                self.scan_results_updated,
                self.scan_results_restored,
            )
        )

    def summary(self) -> str:
        return (
            f"{self.files_read} file(s) read; repos +{self.repos_created} "
            f"~{self.repos_updated}; truth findings +{self.truth_created} "
            f"~{self.truth_updated}; scan results +{self.scan_results_created} new, "
            f"{self.scan_results_updated} changed (new version), "
            f"{self.scan_results_restored} back to an earlier version, "
            f"{self.scan_results_unchanged} unchanged; scan findings "
            f"+{self.scan_findings_created}; {len(self.problems)} file(s) skipped"
            + (f"; {self.truth_versioned} new truth version(s)" if self.truth_versioned else "")
            + (f"; {len(self.conflicts)} conflict(s) kept" if self.conflicts else "")
            + (f"; {len(self.overwritten)} edit(s) overwritten" if self.overwritten else "")
        )


def _assign(obj: Any, values: dict[str, Any]) -> bool:
    changed = False
    for key, value in values.items():
        if getattr(obj, key) != value:
            setattr(obj, key, value)
            changed = True
    return changed


def _upsert_repo(record: RepoRecord, report: ImportReport) -> Repo:
    values = {
        "name": record.name[:200],
        "platform": record.platform[:50],
        "repository_url": record.repository_url[:500],
        "contract_files": record.contract_files,
        "codebases": record.codebases,
        "docs": record.docs,
    }
    repo = Repo.objects.filter(project_id=record.project_id).first()
    if repo is None:
        report.repos_created += 1
        return Repo.objects.create(project_id=record.project_id, **values)
    if _assign(repo, values):
        repo.save()
        report.repos_updated += 1
    return repo


def _repo_for(project_id: str, report: ImportReport) -> Repo:
    repo = Repo.objects.filter(project_id=project_id).first()
    if repo is None:
        # Truth without a repo description: create a minimal repo a curator can complete.
        repo = Repo.objects.create(project_id=project_id, name=project_id)
        report.repos_created += 1
    return repo


def _import_truth(
    repo: Repo, records: list[TruthRecord], report: ImportReport, *, overwrite: bool = False
) -> None:
    existing = {t.finding_id: t for t in repo.truth_findings.current()}
    new = []
    for r in records:
        values = {
            "order": r.order,
            "severity": r.severity,
            "raw_severity": r.raw_severity[:50],
            "title": r.title,
            "description": r.description,
            "category": r.category[:100],
            "contracts": r.contracts,
        }
        found = existing.pop(r.finding_id[:200], None)
        if found is None:
            new.append(TruthFinding(repo=repo, finding_id=r.finding_id[:200], **values))
            continue
        _update_truth(found, values, report, overwrite=overwrite)
    TruthFinding.objects.bulk_create(new)
    report.truth_created += len(new)
    report.truth_kept_missing += len(existing)


def _update_truth(
    found: TruthFinding, values: dict[str, Any], report: ImportReport, *, overwrite: bool
) -> None:
    changed = {k: v for k, v in values.items() if getattr(found, k) != v}
    edited = [f for f in found.edited_fields if f in changed]
    for name in edited:
        conflict = TruthConflict(
            found.repo.project_id, found.finding_id, name, getattr(found, name), changed[name]
        )
        (report.overwritten if overwrite else report.conflicts).append(conflict)
        if not overwrite:
            del changed[name]
    # Edits the file now agrees with, or that were overwritten, are no longer the curator's.
    still_edited = [] if overwrite else edited
    if not changed:
        if found.edited_fields != still_edited:
            found.edited_fields = still_edited
            found.save(update_fields=["edited_fields", "updated_at"])
        return
    frozen = is_frozen(found)
    reason = "import: " + ", ".join(sorted(changed))
    truth_finding_apply(found, changed, edited_fields=still_edited, reason=reason)
    report.truth_updated += 1
    report.truth_versioned += int(frozen)


def _finding_values(r: ScanRecord) -> dict[str, Any]:
    return {
        "external_id": r.external_id[:200],
        "title": r.title,
        "description": r.description,
        "severity": r.severity,
        "raw_severity": r.raw_severity[:50],
        "category": r.category[:100],
        "vulnerability_type": r.vulnerability_type[:300],
        "contracts": r.contracts,
        "file": r.file[:500],
        "location": r.location[:500],
        "confidence": r.confidence,
        "extra": r.extra,
    }


FINDING_FIELDS = (
    "index",
    "external_id",
    "title",
    "description",
    "severity",
    "raw_severity",
    "category",
    "vulnerability_type",
    "contracts",
    "file",
    "location",
    "confidence",
    "extra",
)


def _digest(rows: Iterable[dict[str, Any]]) -> str:
    canonical = json.dumps(
        [[row[k] for k in FINDING_FIELDS] for row in sorted(rows, key=lambda r: r["index"])],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def findings_hash(records: Iterable[ScanRecord]) -> str:
    """The content identity of a scan file: SHA-256 of its normalized findings, in order.

    Only what is stored per finding (and judged) counts; metadata such as token usage, the
    file's name or the order of keys in it does not.
    """
    return _digest({"index": r.index, **_finding_values(r)} for r in records)


def stored_findings_hash(result: ScanResult) -> str:
    """:func:`findings_hash` of a stored version, computed from its findings."""
    return _digest(result.findings.values(*FINDING_FIELDS))


def _make_current(result: ScanResult) -> None:
    # Demote first: at most one current version per scanner and repo (a constraint).
    ScanResult.objects.filter(scanner_id=result.scanner_id, repo_id=result.repo_id).filter(
        is_current=True
    ).exclude(pk=result.pk).update(is_current=False)
    if not result.is_current:
        result.is_current = True
        result.save(update_fields=["is_current", "updated_at"])


@transaction.atomic
def audit_scan_result_make_current(*, scan_result: ScanResult) -> ScanResult:
    """Make an earlier version the one that new runs evaluate and the leaderboard ranks.

    Nothing is deleted: runs of every version stay as they are.
    """
    Scanner.objects.select_for_update(no_key=True).filter(pk=scan_result.scanner_id).first()
    scan_result.refresh_from_db()
    was_current = scan_result.is_current
    _make_current(scan_result)
    if not was_current:
        audit_boards_refresh_for_scanners(scanner_ids=[scan_result.scanner_id])
    return scan_result


def import_scan_file(
    scan: ScanFile,
    repo: Repo,
    report: ImportReport,
    *,
    owner: Any = None,
    declared_empty: bool = False,
) -> ScanResult:
    """Store ``scan`` as the current version of its scanner's results for ``repo``.

    ``declared_empty``: the participant said the tool found nothing in the repo (no findings).
    """
    scanner, created = Scanner.objects.get_or_create(
        name=scan.scanner[:100],
        defaults={"owner": owner if getattr(owner, "is_authenticated", False) else None},
    )
    report.scanners_created += int(created)
    # Imports of one scanner's results are serialized, so that two of them never pick the
    # same version number or both make themselves current.
    Scanner.objects.select_for_update(no_key=True).filter(pk=scanner.pk).first()
    digest = findings_hash(scan.findings)
    versions = ScanResult.objects.filter(scanner=scanner, repo=repo)
    same = versions.filter(content_hash=digest).first()
    if same is not None:
        if same.is_current:
            report.scan_results_unchanged += 1
        else:
            _make_current(same)
            report.scan_results_restored += 1
            report.changed_scanner_ids.add(scanner.pk)
        if declared_empty and not same.declared_empty and not scan.findings:
            same.declared_empty = True
            same.save(update_fields=["declared_empty", "updated_at"])
        report.scan_results.append(same)
        return same
    last = versions.aggregate(last=Max("version"))["last"]
    versions.filter(is_current=True).update(is_current=False)
    result = ScanResult.objects.create(
        scanner=scanner,
        repo=repo,
        version=(last or 0) + 1,
        is_current=True,
        content_hash=digest,
        source_name=scan.source_name[:300],
        raw_metadata=scan.metadata,
        declared_empty=declared_empty and not scan.findings,
    )
    if last is None:
        report.scan_results_created += 1
    else:
        report.scan_results_updated += 1
        report.changed_scanner_ids.add(scanner.pk)
    ScanFinding.objects.bulk_create(
        ScanFinding(scan_result=result, index=r.index, **_finding_values(r)) for r in scan.findings
    )
    report.scan_findings_created += len(scan.findings)
    report.scan_results.append(result)
    return result


@transaction.atomic
def audit_import_dataset(
    *,
    data: DataSet,
    owner: Any = None,
    dataset: str | None = None,
    overwrite: bool = False,
) -> ImportReport:
    """Import parsed data; its repos join ``dataset`` (a slug) when one is given."""
    report = ImportReport(files_read=data.files_read, problems=list(data.problems))
    repos: dict[str, Repo] = {}
    for record in data.repos.values():
        repos[record.project_id] = _upsert_repo(record, report)
    for project_id, truths in data.truths.items():
        repo = repos.get(project_id) or _repo_for(project_id, report)
        repos[project_id] = repo
        _import_truth(repo, truths, report, overwrite=overwrite)
    if dataset and repos:
        chosen, _ = audit_dataset_get_or_create(slug=dataset)
        report.dataset = chosen.slug
        published = audit_dataset_add_repos(dataset=chosen, repos=list(repos.values()))
        report.release_published = str(published) if published else ""
    for scan in data.scans:
        target = Repo.objects.filter(project_id=scan.project_id).first()
        if target is None:
            report.problems.append(
                Problem(
                    scan.source_name,
                    f"unknown repo {scan.project_id!r}: import its repo and ground truth first",
                )
            )
            continue
        import_scan_file(scan, target, report, owner=owner)
    if report.changed_scanner_ids:
        audit_boards_refresh_for_scanners(scanner_ids=report.changed_scanner_ids)
    return report


def audit_import_path(
    *,
    path: str | Path,
    scanner: str | None = None,
    dataset: str | None = None,
    overwrite: bool = False,
) -> ImportReport:
    """Import a data folder, a projects JSON file, or (``scanner`` given) a scanner folder.

    The repos of a data folder or projects file join ``dataset``, by default the folder's
    name or the file's name without extension (a scanner folder joins none).
    """
    data = read_path(Path(path), scanner=scanner, limits=upload_text_limits())
    if dataset is None and not scanner and (data.repos or data.truths):
        dataset = dataset_slug_for_path(path)
    return audit_import_dataset(data=data, dataset=dataset, overwrite=overwrite)
