"""Importing audit data: repos, ground truth and scanner results, idempotently.

Files are parsed by :mod:`scoring.audit.parsing`; a file that cannot be used is reported by
name and reason and skipped while the rest imports. Re-importing the same data changes
nothing; changed findings are updated in place. Truth findings missing from a newer file are
kept (their results reference them) and reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction

from benchmarks_app.models import Repo, ScanFinding, Scanner, ScanResult, TruthFinding
from scoring.audit.parsing import (
    DataSet,
    ParseError,
    Problem,
    RepoRecord,
    ScanFile,
    ScanRecord,
    TruthRecord,
    loads,
    parse_projects,
    parse_repo,
    parse_scan,
    parse_truth,
    read_path,
    scan_project_id,
)


@dataclass
class ImportReport:
    files_read: int = 0
    repos_created: int = 0
    repos_updated: int = 0
    truth_created: int = 0
    truth_updated: int = 0
    truth_kept_missing: int = 0
    scanners_created: int = 0
    scan_results_created: int = 0
    scan_results_updated: int = 0
    scan_findings_created: int = 0
    scan_findings_updated: int = 0
    scan_findings_removed: int = 0
    problems: list[Problem] = field(default_factory=list)
    scan_results: list[ScanResult] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(
            (
                self.repos_created,
                self.repos_updated,
                self.truth_created,
                self.truth_updated,
                self.scan_results_created,
                self.scan_findings_created,
                self.scan_findings_updated,
                self.scan_findings_removed,
            )
        )

    def summary(self) -> str:
        return (
            f"{self.files_read} file(s) read; repos +{self.repos_created} "
            f"~{self.repos_updated}; truth findings +{self.truth_created} "
            f"~{self.truth_updated}; scan results +{self.scan_results_created} "
            f"~{self.scan_results_updated}; scan findings +{self.scan_findings_created} "
            f"~{self.scan_findings_updated} -{self.scan_findings_removed}; "
            f"{len(self.problems)} file(s) skipped"
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


def _import_truth(repo: Repo, records: list[TruthRecord], report: ImportReport) -> None:
    existing = {t.finding_id: t for t in repo.truth_findings.all()}
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
        found = existing.pop(r.finding_id, None)
        if found is None:
            new.append(TruthFinding(repo=repo, finding_id=r.finding_id[:200], **values))
        elif _assign(found, values):
            found.save()
            report.truth_updated += 1
    TruthFinding.objects.bulk_create(new)
    report.truth_created += len(new)
    report.truth_kept_missing += len(existing)


def _finding_values(r: ScanRecord) -> dict[str, Any]:
    return {
        "external_id": r.external_id,
        "title": r.title,
        "description": r.description,
        "severity": r.severity,
        "raw_severity": r.raw_severity[:50],
        "category": r.category[:100],
        "vulnerability_type": r.vulnerability_type,
        "contracts": r.contracts,
        "file": r.file,
        "location": r.location,
        "confidence": r.confidence,
        "extra": r.extra,
    }


def import_scan_file(
    scan: ScanFile, repo: Repo, report: ImportReport, *, owner: Any = None
) -> ScanResult:
    scanner, created = Scanner.objects.get_or_create(
        name=scan.scanner[:100],
        defaults={"owner": owner if getattr(owner, "is_authenticated", False) else None},
    )
    report.scanners_created += int(created)
    result = ScanResult.objects.filter(scanner=scanner, repo=repo).first()
    if result is None:
        result = ScanResult.objects.create(
            scanner=scanner,
            repo=repo,
            source_name=scan.source_name[:300],
            raw_metadata=scan.metadata,
        )
        report.scan_results_created += 1
    elif _assign(result, {"source_name": scan.source_name[:300], "raw_metadata": scan.metadata}):
        result.save()
        report.scan_results_updated += 1
    existing = {f.index: f for f in result.findings.all()}
    new = []
    for r in scan.findings:
        values = _finding_values(r)
        found = existing.pop(r.index, None)
        if found is None:
            new.append(ScanFinding(scan_result=result, index=r.index, **values))
        elif _assign(found, values):
            found.save()
            report.scan_findings_updated += 1
    ScanFinding.objects.bulk_create(new)
    report.scan_findings_created += len(new)
    if existing:
        ScanFinding.objects.filter(pk__in=[f.pk for f in existing.values()]).delete()
        report.scan_findings_removed += len(existing)
    report.scan_results.append(result)
    return result


@transaction.atomic
def audit_import_dataset(*, data: DataSet, owner: Any = None) -> ImportReport:
    report = ImportReport(files_read=data.files_read, problems=list(data.problems))
    for record in data.repos.values():
        _upsert_repo(record, report)
    for project_id, truths in data.truths.items():
        _import_truth(_repo_for(project_id, report), truths, report)
    for scan in data.scans:
        repo = Repo.objects.filter(project_id=scan.project_id).first()
        if repo is None:
            report.problems.append(
                Problem(
                    scan.source_name,
                    f"unknown repo {scan.project_id!r}: import its repo and ground truth first",
                )
            )
            continue
        import_scan_file(scan, repo, report, owner=owner)
    return report


def audit_import_path(*, path: str | Path, scanner: str | None = None) -> ImportReport:
    """Import a data folder, a projects JSON file, or (``scanner`` given) a scanner folder."""
    return audit_import_dataset(data=read_path(Path(path), scanner=scanner))


UPLOAD_KINDS = ("auto", "projects", "repo", "truth", "scan")


def _classify(name: str, data: Any, kind: str) -> str:
    if kind != "auto":
        return kind
    if name.endswith("_results.json") or name.startswith("baseline_"):
        return "scan"
    if isinstance(data, dict):
        if "vulnerabilities" in data:
            return "truth"
        if "findings" in data:
            return "scan"
        return "repo"
    if isinstance(data, list) and data and isinstance(data[0], dict):
        first = data[0]
        if "vulnerabilities" in first:
            return "projects"
        if "Issue" in first or "finding_id" in first:
            return "truth"
        return "scan"
    raise ParseError("cannot tell what this file holds; choose its kind explicitly")


def dataset_from_uploads(
    files: Iterable[tuple[str, bytes]], *, kind: str = "auto", scanner: str = ""
) -> DataSet:
    """Parse uploaded ``(filename, content)`` pairs into a :class:`DataSet` (problems kept)."""
    data = DataSet()
    for name, content in files:
        data.files_read += 1
        stem = Path(name).name.removesuffix(".json")
        try:
            parsed = loads(content)
            what = _classify(Path(name).name, parsed, kind)
            if what == "projects":
                repos, truths = parse_projects(parsed)
                data.repos.update({r.project_id: r for r in repos})
                data.truths.update(truths)
            elif what == "repo":
                repo = parse_repo(parsed, fallback_id=stem)
                data.repos[repo.project_id] = repo
            elif what == "truth":
                project_id, records = parse_truth(parsed, project_id=stem)
                data.truths[project_id] = records
            else:
                if not scanner:
                    raise ParseError("a scanner name is needed to import scan results")
                findings, metadata = parse_scan(parsed)
                project_id = str(metadata.get("project") or "") or scan_project_id(Path(name).name)
                data.scans.append(ScanFile(scanner, project_id, name, findings, metadata))
        except ParseError as exc:
            data.problems.append(Problem(name, str(exc)))
    return data


def audit_import_uploads(
    *, files: Iterable[tuple[str, bytes]], kind: str = "auto", scanner: str = "", owner: Any = None
) -> ImportReport:
    if kind not in UPLOAD_KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(UPLOAD_KINDS)}")
    return audit_import_dataset(
        data=dataset_from_uploads(files, kind=kind, scanner=scanner), owner=owner
    )
