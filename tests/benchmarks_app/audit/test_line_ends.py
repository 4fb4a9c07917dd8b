"""Text keeps one kind of line end on every path that stores it, so an edit that touched
only other fields changes nothing else (issue 26, item 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from benchmarks_app.models import TruthFinding
from benchmarks_app.services.audit import audit_truth_finding_edit
from scoring.text import normalize_line_ends
from tests.benchmarks_app.audit.test_curation import current, edit_in_admin, import_audit

pytestmark = pytest.mark.django_db

MULTILINE = "Vault.withdraw sends ETH before updating balances.\n\nSteps:\n1. deposit\n2. re-enter"
TRUTH = {
    "project_id": "p1",
    "vulnerabilities": [
        {
            "finding_id": "H-01",
            "severity": "high",
            "title": "Reentrancy in withdraw",
            "description": MULTILINE,
        }
    ],
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "mini-set"
    (root / "source_of_truth").mkdir(parents=True)
    (root / "source_of_truth" / "p1.json").write_text(json.dumps(TRUTH))
    return root


@pytest.fixture
def admin_client(db: Any) -> Client:
    admin = get_user_model().objects.create_superuser("curator", password="pw")
    client = Client()
    client.force_login(admin)
    return client


def test_normalize_line_ends() -> None:
    assert normalize_line_ends("a\r\nb\rc\nd") == "a\nb\nc\nd"
    assert normalize_line_ends(None) is None and normalize_line_ends(3) == 3


def test_admin_edit_of_title_and_category_leaves_the_description_byte_identical(
    folder: Path, admin_client: Client
) -> None:
    import_audit(folder)
    finding = current("H-01")
    before = finding.description
    # A browser posts a textarea's text with \r\n line ends.
    edit_in_admin(
        admin_client,
        finding,
        title="Reentrancy in Vault.withdraw",
        category="reentrancy",
        description=before.replace("\n", "\r\n"),
    )
    edited = current("H-01")
    assert edited.title == "Reentrancy in Vault.withdraw"
    assert edited.description.encode() == before.encode()
    assert edited.edited_fields == ["category", "title"]

    # The next import reports the curator's two edits, and no conflict on the description.
    _, err = import_audit(folder)
    assert "description" not in err
    assert current("H-01").description == before


def test_import_of_a_windows_file_is_no_change(folder: Path, tmp_path: Path) -> None:
    import_audit(folder)
    windows = json.dumps(TRUTH).replace("\\n", "\\r\\n")
    (folder / "source_of_truth" / "p1.json").write_text(windows)
    import_audit(folder)
    finding = current("H-01")
    assert finding.description == MULTILINE and finding.edited_fields == []
    assert TruthFinding.objects.filter(finding_id="H-01").count() == 1


def test_service_edit_stores_unix_line_ends(folder: Path) -> None:
    import_audit(folder)
    finding = current("H-01")
    # The same text with other line ends is no edit at all.
    same = audit_truth_finding_edit(
        finding=finding, changes={"description": MULTILINE.replace("\n", "\r\n")}
    )
    assert same.edited_fields == [] and same.description == MULTILINE
    changed = audit_truth_finding_edit(
        finding=finding, changes={"description": "one\r\ntwo\rthree"}
    )
    changed.refresh_from_db()
    assert changed.description == "one\ntwo\nthree" and changed.edited_fields == ["description"]


def test_saving_any_model_text_normalizes_it_in_the_instance_and_the_database() -> None:
    from tests.factories.audit import RepoFactory, TruthFindingFactory

    truth = TruthFindingFactory.create(repo=RepoFactory.create(), description="a\r\nb")
    assert truth.description == "a\nb"
    TruthFinding.objects.filter(pk=truth.pk).update(description="c\rd")
    truth.refresh_from_db()
    assert truth.description == "c\nd"
