"""Importing audit data uploaded as files (the admin's upload form): each file's kind is
detected from its name and shape, or chosen; a file that cannot be used is reported by name
and skipped while the rest imports (:func:`.importing.audit_import_dataset`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks_app.services.audit.importing import ImportReport, audit_import_dataset
from benchmarks_app.services.uploads import upload_text_limits
from scoring.audit.parsing import (
    DataSet,
    ParseError,
    Problem,
    ScanFile,
    loads,
    parse_projects,
    parse_repo,
    parse_scan,
    parse_truth,
    scan_project_id,
)

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
                findings, metadata = parse_scan(parsed, limits=upload_text_limits())
                project_id = str(metadata.get("project") or "") or scan_project_id(Path(name).name)
                data.scans.append(ScanFile(scanner, project_id, name, findings, metadata))
        except ParseError as exc:
            data.problems.append(Problem(name, str(exc)))
    return data


def audit_import_uploads(
    *,
    files: Iterable[tuple[str, bytes]],
    kind: str = "auto",
    scanner: str = "",
    owner: Any = None,
    dataset: str | None = None,
    overwrite: bool = False,
) -> ImportReport:
    if kind not in UPLOAD_KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(UPLOAD_KINDS)}")
    return audit_import_dataset(
        data=dataset_from_uploads(files, kind=kind, scanner=scanner),
        owner=owner,
        dataset=dataset or None,
        overwrite=overwrite,
    )
