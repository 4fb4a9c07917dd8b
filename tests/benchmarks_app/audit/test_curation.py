"""Curation never silently undone: admin edits survive re-imports (as conflicts), show in the
finding's history, and never change a published release; releases are made in the admin."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from benchmarks_app.models import TruthFinding
from benchmarks_app.models.audit import AuditDataset, DatasetRelease
from benchmarks_app.services.audit import (
    DatasetError,
    audit_release_create,
    audit_release_publish,
    audit_truth_finding_edit,
)

pytestmark = pytest.mark.django_db

TRUTH = {
    "project_id": "p1",
    "vulnerabilities": [
        {
            "finding_id": "H-01",
            "severity": "high",
            "title": "Reentrancy in withdraw",
            "description": "Vault.withdraw sends ETH before updating balances.",
        },
        {
            "finding_id": "M-01",
            "severity": "medium",
            "title": "Oracle price staleness",
            "description": "Oracle.getPrice does not check updatedAt.",
        },
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


def import_audit(folder: Path, *args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_audit", str(folder), *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def edit_in_admin(client: Client, finding: TruthFinding, **changes: Any) -> Any:
    data = {
        "order": finding.order,
        "severity": finding.severity,
        "raw_severity": finding.raw_severity,
        "title": finding.title,
        "description": finding.description,
        "category": finding.category,
        "contracts": json.dumps(finding.contracts),
        **changes,
    }
    url = reverse("admin:benchmarks_app_truthfinding_change", args=[finding.pk])
    return client.post(url, data, follow=True)


def current(finding_id: str) -> TruthFinding:
    return TruthFinding.objects.current().get(finding_id=finding_id)


def test_first_import_names_the_dataset_after_the_folder_and_publishes_release_one(
    folder: Path,
) -> None:
    out, _ = import_audit(folder)
    dataset = AuditDataset.objects.get(slug="mini-set")
    release = DatasetRelease.objects.get(dataset=dataset)
    assert (release.number, release.is_published, dataset.official_release) == (1, True, release)
    assert set(release.truth_findings.values_list("finding_id", flat=True)) == {"H-01", "M-01"}
    assert "mini-set@1 published" in out
    # Importing again publishes nothing new and changes nothing.
    again, _ = import_audit(folder)
    assert DatasetRelease.objects.count() == 1 and "published" not in again


def test_admin_edit_survives_reimport_as_a_conflict_and_shows_in_history(
    folder: Path, admin_client: Client
) -> None:
    import_audit(folder, "--dataset", "curated")
    release = DatasetRelease.objects.get()
    original = current("H-01")
    page = edit_in_admin(admin_client, original, severity="Medium")
    assert "new version" in page.content.decode()

    edited = current("H-01")
    assert edited.pk != original.pk and edited.supersedes == original
    assert (edited.severity, edited.edited_fields) == ("Medium", ["severity"])
    original.refresh_from_db()
    # The published release keeps what it froze.
    assert (original.severity, original.is_current) == ("High", False)
    assert list(release.truth_findings.filter(finding_id="H-01")) == [original]
    # The edit is in the history, with the curator who made it.
    record = edited.history.first()
    assert record is not None and record.history_user.username == "curator"
    assert record.severity == "Medium" and "severity" in (record.history_change_reason or "")
    history = admin_client.get(
        reverse("admin:benchmarks_app_truthfinding_history", args=[edited.pk])
    )
    assert history.status_code == 200 and "curator" in history.content.decode()

    out, err = import_audit(folder, "--dataset", "curated")
    assert "conflict" in err and "H-01" in err and "severity" in err
    assert "'Medium'" in err and "'High'" in err
    assert "1 conflict(s) kept" in out
    assert current("H-01").severity == "Medium"
    assert TruthFinding.objects.filter(finding_id="H-01").count() == 2

    out, err = import_audit(folder, "--dataset", "curated", "--overwrite")
    assert "overwritten admin edit" in out and "conflict" not in err
    now = current("H-01")
    # Not in any published release: overwritten in place, no more edit to keep.
    assert (now.pk, now.severity, now.edited_fields) == (edited.pk, "High", [])
    assert list(release.truth_findings.values_list("severity", flat=True).order_by("order")) == [
        "High",
        "Medium",
    ]


def test_a_changed_file_makes_a_new_version_for_the_next_release(folder: Path) -> None:
    import_audit(folder)
    release = DatasetRelease.objects.get()
    frozen = sorted(release.truth_findings.values_list("pk", "title"))
    changed = json.loads(json.dumps(TRUTH))
    changed["vulnerabilities"][1]["title"] = "Oracle price can be stale"
    (folder / "source_of_truth" / "p1.json").write_text(json.dumps(changed))
    out, _ = import_audit(folder)
    assert "new version" in out
    assert sorted(release.truth_findings.values_list("pk", "title")) == frozen
    assert current("M-01").title == "Oracle price can be stale"

    second = audit_release_publish(release=audit_release_create(dataset=release.dataset))
    assert second.number == 2
    assert set(second.truth_findings.values_list("title", flat=True)) == {
        "Reentrancy in withdraw",
        "Oracle price can be stale",
    }
    assert release.dataset.official_release == release  # official until a maintainer moves it


def test_unpublished_edits_are_in_place_and_drafts_take_new_versions(folder: Path) -> None:
    import_audit(folder)
    dataset = AuditDataset.objects.get()
    draft = audit_release_create(dataset=dataset)
    finding = current("M-01")
    # In release 1 (published) and the draft: a new version, which replaces it in the draft.
    new = audit_truth_finding_edit(finding=finding, changes={"title": "Stale oracle"})
    assert new.pk != finding.pk
    assert draft.truth_findings.filter(finding_id="M-01").get() == new
    # Now only in the draft: edited in place.
    again = audit_truth_finding_edit(finding=new, changes={"category": "oracle"})
    assert again.pk == new.pk and sorted(again.edited_fields) == ["category", "title"]
    with pytest.raises(DatasetError, match="earlier version"):
        audit_truth_finding_edit(finding=finding, changes={"title": "x"})
    with pytest.raises(DatasetError, match="finding_id"):
        audit_truth_finding_edit(finding=again, changes={"finding_id": "X"})


def test_releases_are_created_published_and_made_official_in_the_admin(
    folder: Path, admin_client: Client
) -> None:
    import_audit(folder, "--dataset", "curated")
    dataset = AuditDataset.objects.get()
    changelist = reverse("admin:benchmarks_app_auditdataset_changelist")
    done = admin_client.post(
        changelist, {"action": "create_release", "_selected_action": [dataset.pk]}, follow=True
    )
    assert "Created curated@2" in done.content.decode()
    draft = DatasetRelease.objects.get(number=2)
    assert not draft.is_published and draft.truth_findings.count() == 2
    releases = reverse("admin:benchmarks_app_datasetrelease_changelist")
    admin_client.post(releases, {"action": "publish", "_selected_action": [draft.pk]})
    admin_client.post(releases, {"action": "make_official", "_selected_action": [draft.pk]})
    draft.refresh_from_db()
    dataset.refresh_from_db()
    assert draft.is_published and dataset.official_release == draft
    # A published release cannot be deleted, nor can the truth it froze.
    first = DatasetRelease.objects.get(number=1)
    delete = reverse("admin:benchmarks_app_datasetrelease_delete", args=[first.pk])
    assert admin_client.get(delete).status_code == 403
    frozen = first.truth_findings.first()
    assert frozen is not None
    gone = reverse("admin:benchmarks_app_truthfinding_delete", args=[frozen.pk])
    assert admin_client.get(gone).status_code == 403
