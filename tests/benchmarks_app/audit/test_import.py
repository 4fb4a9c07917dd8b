from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmarks_app.models import Repo, ScanFinding, Scanner, ScanResult, TruthFinding
from benchmarks_app.services.audit import audit_import_path, audit_import_uploads

pytestmark = pytest.mark.django_db

FINDING = {
    "title": "Reentrancy in withdraw",
    "description": "Vault.withdraw sends ETH before updating balances.",
    "vulnerability_type": "reentrancy",
    "severity": "critical",
    "confidence": 0.9,
    "location": "Vault.withdraw()",
    "file": "Vault.sol",
    "id": "abc",
}


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def _folder(tmp_path: Path) -> Path:
    _write(
        tmp_path / "repos" / "p1.json",
        {"project_id": "p1", "name": "Project One", "platform": "code4rena", "codebases": []},
    )
    _write(
        tmp_path / "source_of_truth" / "p1.json",
        {
            "project_id": "p1",
            "vulnerabilities": [
                {
                    "finding_id": "H-01",
                    "severity": "high",
                    "title": "Reentrancy",
                    "description": "d",
                },
                {"finding_id": "M-01", "severity": "med", "title": "Oracle", "description": "d2"},
            ],
        },
    )
    # A truth file in the list shape, for a repo without a repos/ entry.
    _write(
        tmp_path / "source_of_truth" / "p2.json",
        [
            {
                "Issue": "Missing access control",
                "Category": "AC",
                "Severity": "Medium",
                "Contracts": ["Admin.sol"],
                "Description": "x",
            },
        ],
    )
    # Object-shaped scan, list-shaped scan with the baseline_ naming, an empty file, junk.
    _write(
        tmp_path / "tool" / "p1_results.json",
        {"project": "p1", "findings": [FINDING], "token_usage": {"total_tokens": 5}},
    )
    _write(tmp_path / "tool" / "baseline_p2.json", [{**FINDING, "severity": "informational"}])
    _write(tmp_path / "tool" / "p3_results.json", "")
    _write(tmp_path / "other" / "p1_results.json", "[{oops")
    return tmp_path


def test_import_command_all_shapes_reports_bad_files_and_is_idempotent(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    call_command("import_audit", str(folder), stdout=out, stderr=err)
    assert "p3_results.json: empty file" in err.getvalue()
    assert "other/p1_results.json: not valid JSON" in err.getvalue()
    assert set(Repo.objects.values_list("project_id", flat=True)) == {"p1", "p2"}
    assert Repo.objects.get(project_id="p1").name == "Project One"
    assert list(
        TruthFinding.objects.filter(repo__project_id="p1").values_list(
            "finding_id", "severity", "order"
        )
    ) == [("H-01", "High", 0), ("M-01", "Medium", 1)]
    p2 = TruthFinding.objects.get(repo__project_id="p2")
    assert (p2.title, p2.contracts, p2.severity) == (
        "Missing access control",
        ["Admin.sol"],
        "Medium",
    )
    f = ScanFinding.objects.get(scan_result__repo__project_id="p1")
    assert (f.severity, f.raw_severity, f.category, f.file) == (
        "High",
        "critical",
        "Reentrancy",
        "Vault.sol",
    )
    assert ScanResult.objects.get(repo__project_id="p1").raw_metadata["token_usage"] == {
        "total_tokens": 5
    }
    assert ScanFinding.objects.get(scan_result__repo__project_id="p2").is_qa

    counts = (TruthFinding.objects.count(), ScanFinding.objects.count(), Repo.objects.count())
    again = audit_import_path(path=folder)
    assert not again.changed
    assert (
        TruthFinding.objects.count(),
        ScanFinding.objects.count(),
        Repo.objects.count(),
    ) == counts

    # A changed file becomes a new current version; the first one and its finding stay.
    first = ScanResult.objects.get(repo__project_id="p1")
    _write(
        folder / "tool" / "p1_results.json",
        {"project": "p1", "findings": [{**FINDING, "severity": "low"}]},
    )
    changed = audit_import_path(path=folder)
    assert (changed.scan_results_updated, changed.scan_findings_created) == (1, 1)
    current = ScanResult.objects.current().get(repo__project_id="p1")
    assert (current.version, current.findings.get().severity) == (2, "Low")
    first.refresh_from_db()
    assert (first.version, first.is_current, first.findings.get().severity) == (1, False, "High")
    # The command says so.
    _write(folder / "tool" / "p1_results.json", {"project": "p1", "findings": [FINDING, FINDING]})
    out = io.StringIO()
    call_command("import_audit", str(folder), stdout=out, stderr=io.StringIO())
    assert "the current version now reflects the new file" in out.getvalue()
    assert ScanResult.objects.current().get(repo__project_id="p1").findings.count() == 2


def test_projects_file_and_scanner_folder(tmp_path: Path) -> None:
    _write(
        tmp_path / "projects.json",
        [
            {
                "project_id": "px",
                "name": "PX",
                "platform": "cantina",
                "codebases": [],
                "vulnerabilities": [
                    {"finding_id": "1", "severity": "low", "title": "t", "description": "d"}
                ],
            }
        ],
    )
    report = audit_import_path(path=tmp_path / "projects.json")
    assert report.repos_created == 1 and report.truth_created == 1
    _write(tmp_path / "newtool" / "px_results.json", [FINDING, FINDING])
    _write(tmp_path / "newtool" / "unknown_results.json", [FINDING])
    call_command(
        "import_audit",
        str(tmp_path / "newtool"),
        "--scanner",
        "newtool",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    assert Scanner.objects.get(name="newtool").scan_results.get().findings.count() == 2
    with pytest.raises(CommandError, match="1 file"):
        call_command(
            "import_audit",
            str(tmp_path / "newtool"),
            "--scanner",
            "newtool",
            "--strict",
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )


def test_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_audit", str(tmp_path / "nope"), stdout=io.StringIO())


def test_uploads_auto_detect_kinds() -> None:
    report = audit_import_uploads(
        files=[
            (
                "p9.json",
                json.dumps(
                    {
                        "project_id": "p9",
                        "vulnerabilities": [
                            {"finding_id": "H", "severity": "high", "title": "t", "description": ""}
                        ],
                    }
                ).encode(),
            ),
            ("p9_results.json", json.dumps([FINDING]).encode()),
            ("empty_results.json", b""),
        ],
        scanner="up",
    )
    assert report.truth_created == 1 and report.scan_findings_created == 1
    assert [p.reason for p in report.problems] == ["empty file"]
