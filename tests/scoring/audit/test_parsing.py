from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoring.audit.folders import read_path
from scoring.audit.parsing import (
    ParseError,
    category_for,
    normalize_severity,
    parse_scan,
    parse_truth,
    scan_project_id,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("critical", "High"),
        ("HIGH", "High"),
        ("med", "Medium"),
        ("Moderate", "Medium"),
        ("low", "Low"),
        ("informational", "Info"),
        ("Best Practices", "Best Practices"),
        ("best-practice", "Best Practices"),
        ("BestPractices", "Best Practices"),
    ],
)
def test_severity_normalization(raw: str, expected: str) -> None:
    assert normalize_severity(raw) == expected


def test_unknown_severity_names_the_field() -> None:
    with pytest.raises(ParseError, match=r"finding 3\.severity: unknown severity 'urgent'"):
        parse_scan([{"title": "a", "severity": "low"}] * 2 + [{"title": "b", "severity": "urgent"}])


def test_category_from_vulnerability_type_keywords() -> None:
    assert category_for("reentrancy/gas griefing") == "Reentrancy"
    assert category_for("missing access control") == "Access control"
    assert category_for("oracle freshness/validation flaw") == "Oracle"
    assert category_for("something new") == "Other"
    assert category_for("") == ""


def test_truth_list_shape() -> None:
    pid, records = parse_truth(
        [
            {
                "Issue": "Reentrancy in withdraw",
                "Category": "Reentrancy",
                "Severity": "High",
                "Contracts": "Vault.sol, Pool.sol",
                "Description": "d",
            }
        ],
        project_id="proj",
    )
    assert pid == "proj" and records[0].title == "Reentrancy in withdraw"
    assert records[0].contracts == ["Vault.sol", "Pool.sol"] and records[0].category == "Reentrancy"
    assert records[0].finding_id == "proj-001"


def test_scan_shapes_list_and_object() -> None:
    finding = {
        "title": "t",
        "description": "d",
        "severity": "med",
        "vulnerability_type": "dos",
        "confidence": 0.5,
        "location": "A.f()",
        "file": "A.sol",
        "id": "x1",
        "extra": 1,
    }
    listed, meta = parse_scan([finding])
    wrapped, meta2 = parse_scan({"project": "p", "findings": [finding], "token_usage": {"a": 1}})
    assert listed == wrapped and meta == {} and meta2["token_usage"] == {"a": 1}
    assert listed[0].severity == "Medium" and listed[0].category == "DoS"
    assert listed[0].extra == {"extra": 1} and listed[0].external_id == "x1"


def test_scan_file_names() -> None:
    assert scan_project_id("code4rena_x_results.json") == "code4rena_x"
    assert scan_project_id("baseline_code4rena_x.json") == "code4rena_x"


def test_read_folder_reports_empty_and_broken_files(tmp_path: Path) -> None:
    (tmp_path / "source_of_truth").mkdir()
    (tmp_path / "source_of_truth" / "p.json").write_text(
        json.dumps(
            {
                "project_id": "p",
                "vulnerabilities": [
                    {"finding_id": "H-1", "severity": "high", "title": "t", "description": "d"}
                ],
            }
        )
    )
    scanner = tmp_path / "tool"
    scanner.mkdir()
    (scanner / "p_results.json").write_text("[]")
    (scanner / "q_results.json").write_text("")
    (scanner / "r_results.json").write_text("{not json")
    data = read_path(tmp_path)
    assert [s.project_id for s in data.scans] == ["p"]
    reasons = {Path(p.path).name: p.reason for p in data.problems}
    assert reasons["q_results.json"] == "empty file"
    assert reasons["r_results.json"].startswith("not valid JSON")
