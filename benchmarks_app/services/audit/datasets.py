"""Audit datasets and their releases; curation of truth findings that never changes a release.

A dataset is a named set of repos; a release (``SLUG@N``) freezes the truth findings of its
repos once published. A truth finding that a published release contains is never changed:
an edit (in the admin, or by a re-import) makes a new version that ``supersedes`` it and is
current from then on, which the next release will contain; the old row stays with the
releases and runs that used it. A finding no published release contains is edited in place.
Both are recorded in the finding's history (django-simple-history).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.text import slugify

from benchmarks_app.models import Repo, TruthFinding
from benchmarks_app.models.audit import AuditDataset, DatasetRelease
from scoring.text import normalize_line_ends

# What a maintainer may change on a truth finding (the repo and finding id identify it).
TRUTH_EDITABLE_FIELDS = (
    "order",
    "severity",
    "raw_severity",
    "title",
    "description",
    "category",
    "contracts",
)
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")


class DatasetError(ValueError):
    """A dataset or release request that cannot be done; the message is ``"field: problem"``."""


def dataset_slug_for_path(path: str | Path) -> str:
    """The default dataset of an import: the folder's name, or the file's without extension."""
    p = Path(path)
    name = p.resolve().name if p.is_dir() else p.stem
    slug = slugify(name)
    if not slug:
        raise DatasetError(f"dataset: cannot make a dataset name from {str(path)!r}; give one")
    return slug


def check_slug(slug: str) -> str:
    slug = (slug or "").strip()
    if not slug or len(slug) > 100 or not _SLUG.fullmatch(slug):
        raise DatasetError(
            f"dataset: {slug!r} is not a dataset name (letters, digits, - and _, at most 100)"
        )
    return slug


def audit_dataset_get_or_create(*, slug: str, name: str = "") -> tuple[AuditDataset, bool]:
    dataset, created = AuditDataset.objects.get_or_create(
        slug=check_slug(slug), defaults={"name": name[:200] or slug}
    )
    return dataset, created


def is_frozen(finding: TruthFinding) -> bool:
    """Whether a published release contains ``finding`` (it must never change then)."""
    return finding.releases.filter(is_published=True).exists()


def _new_version(
    old: TruthFinding, values: dict[str, Any], *, edited_fields: list[str], reason: str
) -> TruthFinding:
    """A new current version of ``old`` with ``values``; draft releases take it instead."""
    old.is_current = False
    old._change_reason = "superseded by a new version"  # type: ignore[attr-defined]
    old.save(update_fields=["is_current", "updated_at"])
    new = TruthFinding(
        repo_id=old.repo_id,
        finding_id=old.finding_id,
        supersedes=old,
        is_current=True,
        edited_fields=edited_fields,
        **{f: getattr(old, f) for f in TRUTH_EDITABLE_FIELDS},
    )
    for key, value in values.items():
        setattr(new, key, value)
    new._change_reason = reason  # type: ignore[attr-defined]
    new.save()
    for release in old.releases.filter(is_published=False):
        release.truth_findings.remove(old)
        release.truth_findings.add(new)
    return new


def truth_finding_apply(
    finding: TruthFinding, values: dict[str, Any], *, edited_fields: list[str], reason: str
) -> TruthFinding:
    """Apply ``values`` to a current finding: in place, or as a new version when frozen."""
    if is_frozen(finding):
        return _new_version(finding, values, edited_fields=edited_fields, reason=reason)
    for key, value in values.items():
        setattr(finding, key, value)
    finding.edited_fields = edited_fields
    finding._change_reason = reason  # type: ignore[attr-defined]
    finding.save()
    return finding


@transaction.atomic
def audit_truth_finding_edit(*, finding: TruthFinding, changes: dict[str, Any]) -> TruthFinding:
    """A maintainer's edit of a current truth finding; the changed fields are remembered
    (``edited_fields``) so that a re-import keeps them. Returns the finding now current."""
    finding = TruthFinding.objects.select_for_update().get(pk=finding.pk)
    if not finding.is_current:
        raise DatasetError(
            f"truth finding: #{finding.pk} is an earlier version; edit the current one"
        )
    unknown = sorted(set(changes) - set(TRUTH_EDITABLE_FIELDS))
    if unknown:
        raise DatasetError(
            f"{unknown[0]}: cannot be edited (only {', '.join(TRUTH_EDITABLE_FIELDS)})"
        )
    # Compared as stored (line ends normalized): text nobody touched is no change.
    changes = {k: normalize_line_ends(v) for k, v in changes.items()}
    changed = {k: v for k, v in changes.items() if getattr(finding, k) != v}
    if not changed:
        return finding
    edited = sorted({*finding.edited_fields, *changed})
    reason = "edited: " + ", ".join(sorted(changed))
    if is_frozen(finding):
        reason += f" (new version of #{finding.pk}, which a published release contains)"
    return truth_finding_apply(finding, changed, edited_fields=edited, reason=reason)


@transaction.atomic
def audit_release_create(*, dataset: AuditDataset, notes: str = "") -> DatasetRelease:
    """A draft release: the dataset's repos and their current truth findings, now."""
    AuditDataset.objects.select_for_update(no_key=True).filter(pk=dataset.pk).first()
    repos = list(dataset.repos.all())
    if not repos:
        raise DatasetError(f"dataset: {dataset.slug} has no repos; add some first")
    number = (dataset.releases.aggregate(n=Max("number"))["n"] or 0) + 1
    release = DatasetRelease.objects.create(dataset=dataset, number=number, notes=notes)
    release.repos.set(repos)
    release.truth_findings.set(TruthFinding.objects.current().filter(repo__in=repos))
    return release


@transaction.atomic
def audit_release_publish(*, release: DatasetRelease) -> DatasetRelease:
    """Freeze a release; the first published release of a dataset becomes its official one."""
    release = DatasetRelease.objects.select_for_update(no_key=True).get(pk=release.pk)
    if release.is_published:
        return release
    if not release.repos.exists() and not release.truth_findings.exists():
        raise DatasetError(f"release: {release} is empty; create it from a dataset with repos")
    release.is_published = True
    release.published_at = timezone.now()
    release.save(update_fields=["is_published", "published_at", "updated_at"])
    dataset = release.dataset
    if dataset.official_release_id is None:
        dataset.official_release = release
        dataset.save(update_fields=["official_release", "updated_at"])
    return release


@transaction.atomic
def audit_release_make_official(*, release: DatasetRelease) -> AuditDataset:
    """The release whose boards the site and API show first for its dataset."""
    if not release.is_published:
        raise DatasetError(f"release: {release} is not published; publish it first")
    dataset = release.dataset
    dataset.official_release = release
    dataset.save(update_fields=["official_release", "updated_at"])
    return dataset


@transaction.atomic
def audit_dataset_set_official_judge(*, dataset: AuditDataset, judge: str) -> AuditDataset:
    """The judge whose board is shown first (``offline``, ``openai:MODEL``, ``replay:DIR``)."""
    dataset.official_judge = judge.strip()[:300]
    dataset.save(update_fields=["official_judge", "updated_at"])
    return dataset


def audit_dataset_add_repos(*, dataset: AuditDataset, repos: list[Repo]) -> DatasetRelease | None:
    """Add repos to a dataset; while it has no published release, publish ``SLUG@N`` with
    them (the first import of a dataset makes it usable at once). Returns that release."""
    dataset.repos.add(*repos)
    if dataset.releases.filter(is_published=True).exists():
        return None
    release = audit_release_create(dataset=dataset, notes="created by the first import")
    return audit_release_publish(release=release)
