"""Checks a participant's submission passes before anything is stored: the phase it lands in
(refused with the phases' dates outside every phase), and whether it holds exactly the
findings a live run already judges (then nothing is stored, queued or counted)."""

from __future__ import annotations

from benchmarks_app.models import EvaluationRun, Phase, Repo, RunStatus, ScanResult
from benchmarks_app.models.audit import AuditRunScan, DatasetRelease
from benchmarks_app.selectors.phases import PhaseClosed, phase_open_for
from benchmarks_app.services.audit.importing import findings_hash
from benchmarks_app.services.audit.runs import AuditRunError
from scoring.audit.judges import parse_judge_spec
from scoring.audit.parsing import ScanRecord


class AuditUnchanged(Exception):
    """The upload holds exactly the findings ``run`` already judges: nothing was stored."""

    def __init__(self, run: EvaluationRun) -> None:
        super().__init__(
            f"unchanged: these are the findings that run #{run.pk} already judges "
            f"({run.status}); nothing was stored and no submission was counted"
        )
        self.run = run


def submission_phase(release: DatasetRelease | None) -> Phase | None:
    """The open phase of ``release`` a submission lands in (None: the release has none).

    Raises :class:`AuditRunError` on ``phase`` with the phases' dates when none is open.
    """
    if release is None:
        return None
    try:
        return phase_open_for(release)
    except PhaseClosed as exc:
        raise AuditRunError(f"phase: {exc.message}") from None


_DEAD = (RunStatus.FAILED, RunStatus.CANCELLED)


def unchanged_run(
    *,
    scanner_name: str,
    findings: dict[Repo, list[ScanRecord]],
    judge: str,
    release: DatasetRelease | None,
    phase: Phase | None,
) -> EvaluationRun | None:
    """The live run that already judges exactly these findings, if any (see the module)."""
    current = {
        r.repo_id: r
        for r in ScanResult.objects.current().filter(
            scanner__name=scanner_name, repo__in=list(findings)
        )
    }
    for repo, records in findings.items():
        version = current.get(repo.pk)
        if version is None or version.content_hash != findings_hash(records):
            return None
    try:
        label = parse_judge_spec(judge).label
    except ValueError:
        return None
    wanted = {v.pk for v in current.values()}
    runs = (
        EvaluationRun.objects.filter(
            audit_scans__scan_result_id__in=wanted,
            judge=label,
            release=release,
            phase=phase,
        )
        .exclude(status__in=_DEAD)
        .distinct()
        .order_by("-pk")
    )
    for run in runs[:20]:
        judged = set(AuditRunScan.objects.filter(run=run).values_list("scan_result_id", flat=True))
        if wanted <= judged:
            return run
    return None
