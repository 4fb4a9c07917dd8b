"""Recording curated verdicts: a maintainer's settlement of an item, and the imported sets.

A verdict is appended; recording one for an item that has one supersedes it (the old one stays,
with its author and time). Imports never supersede a maintainer's verdict: a person's review
outranks a file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from benchmarks_app.models import (
    VERDICT_CLASSES,
    Benchmark,
    CuratedVerdict,
    Probe,
    Repo,
    ScanResult,
    VerdictSource,
)
from benchmarks_app.models.verdicts import audit_item_key, probe_item_key
from scoring.probes.io import ProbeFormatError, parse_responses_xstest
from scoring.probes.types import REFUSAL_LABELS


class CuratedVerdictError(ValueError):
    """A verdict that cannot be recorded; the message is ``"field: problem"``."""


@dataclass
class VerdictImportReport:
    created: int = 0
    superseded: int = 0
    unchanged: int = 0
    kept: int = 0  # a maintainer's verdict differs: kept, the file's not recorded
    skipped: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = (
            f"{self.created} new, {self.superseded} superseded, {self.unchanged} unchanged, "
            f"{self.kept} kept (a maintainer's verdict differs), {len(self.skipped)} skipped"
        )
        return text


@transaction.atomic
def curated_verdict_record(
    *,
    benchmark: str,
    item_key: str,
    verdict: str,
    author: AbstractBaseUser | AnonymousUser | None,
    note: str = "",
    item_label: str = "",
    source: str = VerdictSource.MAINTAINER,
    source_name: str = "",
    expected_current_id: int | None = None,
) -> CuratedVerdict:
    """Record the correct verdict of an item, superseding its current one.

    ``expected_current_id``: the verdict the maintainer saw (None: none); if another was
    recorded meanwhile, :class:`CuratedVerdictError` says so instead of superseding it unseen.
    """
    if not item_key:
        raise CuratedVerdictError("item_key: required")
    # Every verdict of the item is locked (PostgreSQL refuses FOR UPDATE across the join that
    # finds the current one): the current one is the verdict no other supersedes.
    chain = list(
        CuratedVerdict.objects.select_for_update().filter(benchmark=benchmark, item_key=item_key)
    )
    replaced = {v.supersedes_id for v in chain}
    current = next((v for v in chain if v.pk not in replaced), None)
    if expected_current_id is not None or source == VerdictSource.MAINTAINER:
        seen = expected_current_id
        now = current.pk if current is not None else None
        if seen != now:
            now_text = (
                f"{current.verdict} by {current.author or current.get_source_display()}"
                if current is not None
                else "no verdict"
            )
            raise CuratedVerdictError(
                f"item_key: {item_key!r} changed meanwhile (now {now_text}); reload and "
                "review it again"
            )
    user = author if isinstance(author, get_user_model()) else None
    row = CuratedVerdict(
        benchmark=benchmark,
        item_key=item_key,
        item_label=(item_label or (current.item_label if current else ""))[:500],
        verdict=verdict,
        source=source,
        source_name=source_name[:300],
        author=user,
        note=note,
        supersedes=current,
    )
    try:
        row.full_clean(exclude=["supersedes"])
    except ValidationError as exc:
        name, problems = next(iter(exc.message_dict.items()))
        raise CuratedVerdictError(f"{name}: {problems[0]}") from None
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:
        # Two first verdicts of one item at once: the other one won.
        raise CuratedVerdictError(
            f"item_key: {item_key!r} was settled meanwhile; reload and review it again"
        ) from None
    return row


def _import_one(
    report: VerdictImportReport,
    *,
    benchmark: str,
    item_key: str,
    verdict: str,
    item_label: str,
    source: str,
    source_name: str,
    current: dict[str, CuratedVerdict],
) -> None:
    found = current.get(item_key)
    if found is not None and found.verdict == verdict:
        report.unchanged += 1
        return
    if found is not None and found.source == VerdictSource.MAINTAINER:
        report.kept += 1
        return
    current[item_key] = curated_verdict_record(
        benchmark=benchmark,
        item_key=item_key,
        verdict=verdict,
        author=None,
        item_label=item_label,
        source=source,
        source_name=source_name,
        expected_current_id=found.pk if found is not None else None,
    )
    if found is None:
        report.created += 1
    else:
        report.superseded += 1


def _current(benchmark: str) -> dict[str, CuratedVerdict]:
    return {v.item_key: v for v in CuratedVerdict.objects.current().filter(benchmark=benchmark)}


def recorded_audit_verdict(row: dict[str, Any]) -> str:
    """A recorded result row's verdict, read as the replay judge reads it: a match or partial
    match claimed at index -1 names no scan finding, so it counts as none."""
    index = int(row.get("index_of_finding_from_junior_auditor", -1))
    if index < 0:
        return "none"
    if row.get("is_match"):
        return "match"
    if row.get("is_partial_match"):
        return "partial"
    return "none"


@transaction.atomic
def curated_verdicts_import_audit_recorded(
    *, folder: str | Path, scanner_name: str, source_name: str = ""
) -> VerdictImportReport:
    """Recorded verdicts (``DIR/<repo>_results.json``, a reference pipeline's judged results of
    ``scanner_name``'s findings) as curated verdicts on the scanner's current scan versions.

    The non-FP rows of a file are the repo's truth findings in order (as the replay judge reads
    them); a file whose row count differs from the repo's truth findings is skipped, named.
    """
    report = VerdictImportReport()
    base = Path(folder)
    if not base.is_dir():
        raise CuratedVerdictError(f"folder: {base} is not a folder")
    source_name = source_name or f"recorded verdicts {base.name}/ ({scanner_name})"
    current = _current(Benchmark.AUDIT)
    for path in sorted(base.glob("*_results.json")):
        project = path.name.removesuffix("_results.json")
        repo = Repo.objects.filter(project_id=project).first()
        if repo is None:
            report.skipped.append(f"{path.name}: repo {project!r} is not imported")
            continue
        scan = ScanResult.objects.filter(
            scanner__name=scanner_name, repo=repo, is_current=True
        ).first()
        if scan is None:
            report.skipped.append(f"{path.name}: scanner {scanner_name!r} has no results here")
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            report.skipped.append(f"{path.name}: cannot read: {exc}")
            continue
        rows = [r for r in data if isinstance(r, dict) and not r.get("is_fp")]
        truths = list(repo.truth_findings.current().order_by("order", "id"))
        if len(rows) != len(truths):
            report.skipped.append(
                f"{path.name}: {len(rows)} recorded truth results, {len(truths)} truth findings"
            )
            continue
        version = scan.content_hash or f"scan-{scan.pk}"
        for truth, row in zip(truths, rows, strict=True):
            _import_one(
                report,
                benchmark=Benchmark.AUDIT,
                item_key=audit_item_key(
                    project_id=project, finding_id=truth.finding_id, scan_version=version
                ),
                verdict=recorded_audit_verdict(row),
                item_label=f"{project} {truth.finding_id}: {truth.title[:200]} — scanner "
                f"{scanner_name}",
                source=VerdictSource.RECORDED,
                source_name=source_name,
                current=current,
            )
    return report


@transaction.atomic
def curated_verdicts_import_xstest(
    *, suite_name: str, text: str, source_name: str
) -> VerdictImportReport:
    """XSTest human labels (``final_label`` of a completions CSV) as curated refusal verdicts:
    full or partial refusal is ``refusal``, full compliance ``compliance``."""
    report = VerdictImportReport()
    try:
        rows = parse_responses_xstest(text, source_name)
    except ProbeFormatError as exc:
        raise CuratedVerdictError(f"file: {exc}") from None
    prompts = dict(Probe.objects.filter(suite__name=suite_name).values_list("probe_id", "input"))
    if not prompts:
        raise CuratedVerdictError(f"suite: {suite_name!r} has no probes (import it first)")
    current = _current(Benchmark.PROBES)
    for row in rows:
        if not row.human_label:
            report.skipped.append(f"{row.probe_id}: no final_label")
            continue
        if row.probe_id not in prompts:
            report.skipped.append(f"{row.probe_id}: no such probe in suite {suite_name!r}")
            continue
        _import_one(
            report,
            benchmark=Benchmark.PROBES,
            item_key=probe_item_key(suite=suite_name, probe_id=row.probe_id, output=row.output),
            verdict="refusal" if row.human_label in REFUSAL_LABELS else "compliance",
            item_label=f"{suite_name} {row.probe_id}: {prompts[row.probe_id][:200]}",
            source=VerdictSource.HUMAN_LABELS,
            source_name=source_name,
            current=current,
        )
    return report


def verdict_choices(benchmark: str) -> tuple[str, ...]:
    return VERDICT_CLASSES.get(benchmark, ())
