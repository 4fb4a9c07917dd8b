"""Reading an audit data folder (``repos/``, ``source_of_truth/``, ``recorded/`` and one folder
per scanner), a scanner folder or a projects JSON file into a :class:`DataSet`: each file is
parsed by :mod:`scoring.audit.parsing`, and a file that cannot be used is a :class:`Problem`
naming it while the rest is still read."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from scoring.audit.json_files import ParseError, load_json
from scoring.audit.parsing import (
    RESERVED_FOLDERS,
    DataSet,
    Problem,
    ScanFile,
    parse_projects,
    parse_repo,
    parse_scan,
    parse_truth,
    scan_project_id,
)
from scoring.limits import DEFAULT_LIMITS, TextLimits


def _json_files(folder: Path) -> Iterable[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() == ".json")


def read_scanner_folder(
    folder: Path, scanner: str, data: DataSet, *, limits: TextLimits = DEFAULT_LIMITS
) -> None:
    for path in _json_files(folder):
        data.files_read += 1
        try:
            findings, metadata = parse_scan(load_json(path), limits=limits)
        except ParseError as exc:
            data.problems.append(Problem(str(path), str(exc)))
            continue
        project_id = str(metadata.get("project") or "") or scan_project_id(path.name)
        data.scans.append(
            ScanFile(
                scanner=scanner,
                project_id=project_id,
                source_name=path.name,
                findings=findings,
                metadata=metadata,
            )
        )


def read_path(
    path: Path, *, scanner: str | None = None, limits: TextLimits = DEFAULT_LIMITS
) -> DataSet:
    """Read a data folder, a scanner folder (``scanner`` given) or a projects JSON file;
    a scan file with a field longer than ``limits`` is a problem (and skipped)."""
    data = DataSet()
    if not path.exists():
        raise ParseError(f"{path}: no such file or folder")
    if path.is_file():
        data.files_read = 1
        try:
            repos, truths = parse_projects(load_json(path))
        except ParseError as exc:
            data.problems.append(Problem(str(path), str(exc)))
            return data
        data.repos = {r.project_id: r for r in repos}
        data.truths = truths
        return data
    if scanner:
        read_scanner_folder(path, scanner, data, limits=limits)
        return data
    repos_dir = path / "repos"
    if repos_dir.is_dir():
        for f in _json_files(repos_dir):
            data.files_read += 1
            try:
                repo = parse_repo(load_json(f), fallback_id=f.stem)
            except ParseError as exc:
                data.problems.append(Problem(str(f), str(exc)))
                continue
            data.repos[repo.project_id] = repo
    truth_dir = path / "source_of_truth"
    if truth_dir.is_dir():
        for f in _json_files(truth_dir):
            data.files_read += 1
            try:
                project_id, records = parse_truth(load_json(f), project_id=f.stem)
            except ParseError as exc:
                data.problems.append(Problem(str(f), str(exc)))
                continue
            data.truths[project_id] = records
    for sub in sorted(p for p in path.iterdir() if p.is_dir()):
        if sub.name in RESERVED_FOLDERS or sub.name.startswith("."):
            continue
        read_scanner_folder(sub, sub.name, data, limits=limits)
    return data
