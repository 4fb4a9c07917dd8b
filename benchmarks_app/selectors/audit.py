"""Audit reads: the scanner leaderboard, the report document and the run page.

Every scanner is ranked on each repo's latest complete evaluation of its current results (the
newest complete :class:`AuditRepoResult` per scanner and repo whose scan result version is
still current: results replaced by a newer import leave the leaderboard until the new version
is evaluated, while their runs stay reproducible through ``--run``). The number of queries
does not grow with the number of scanners, repos or runs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max, Q
from django.utils import timezone

from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    Benchmark,
    EvaluationRun,
    MatchOutcome,
    Scanner,
    TruthFinding,
)
from benchmarks_app.models.audit import AuditRunScan
from benchmarks_app.selectors.visibility import truth_details_visible, visible_runs
from scoring.audit.metrics import (
    RATIO_KEYS,
    as_shown,
    build_report,
    is_row_complete,
    judged,
    overall,
    pct,
)

# The run page's outcome for truth findings left behind a judge failure (never stored).
NOT_JUDGED = "not_judged"


class ReportNotFound(LookupError):
    pass


def _latest_complete(scanner_id: int | None = None) -> list[AuditRepoResult]:
    # Rows without a version were written by hand (benchmarks, tests); they count as current.
    qs = AuditRepoResult.objects.filter(is_complete=True).filter(
        Q(scan_result__isnull=True) | Q(scan_result__is_current=True)
    )
    if scanner_id is not None:
        qs = qs.filter(scanner_id=scanner_id)
    latest_ids = qs.values("scanner_id", "repo_id").annotate(latest=Max("id")).values("latest")
    return list(
        AuditRepoResult.objects.filter(id__in=latest_ids)
        .select_related("scanner", "repo", "scan_result")
        .order_by("scanner__name", "repo__project_id")
    )


def audit_leaderboard() -> list[dict[str, Any]]:
    """One row per scanner, best F1 (with partial) first."""
    by_scanner: dict[str, list[AuditRepoResult]] = defaultdict(list)
    for row in _latest_complete():
        by_scanner[row.scanner.name].append(row)
    board = []
    for name, rows in by_scanner.items():
        totals = overall([r.metrics for r in rows])
        for key in ("repo", "truth_severity_counts", "scan_severity_counts"):
            totals.pop(key, None)
        # Complete evaluations only: nothing is unjudged, every ratio is known.
        for key in ("judge_failed", "not_judged"):
            totals.pop(key, None)
        board.append(
            {
                "scanner": name,
                "scanner_id": rows[0].scanner_id,
                "run_ids": sorted({r.run_id for r in rows}),
                "repos": len(rows),
                **totals,
                "is_complete": True,
            }
        )
    board.sort(key=_rank_key)
    return board


def _desc_nulls_last(value: float | None) -> tuple[bool, float]:
    return (value is None, -(value or 0.0))


def _rank_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """Best F1 with partial first, then F1, then name; a missing score ranks last."""
    return (
        *_desc_nulls_last(row.get("f1_with_partial")),
        *_desc_nulls_last(row.get("f1")),
        row["scanner"],
    )


def audit_report(*, scanner_name: str, run_id: int | None = None) -> dict[str, Any]:
    """The JSON document of ``audit_report`` (see :func:`scoring.audit.metrics.build_report`)."""
    scanner = Scanner.objects.filter(name=scanner_name).first()
    if scanner is None:
        raise ReportNotFound(f"scanner: no scanner named {scanner_name!r}")
    if run_id is None:
        rows = _latest_complete(scanner.pk)
        run_ids = sorted({r.run_id for r in rows})
        run: Any = run_ids[0] if len(run_ids) == 1 else (run_ids or None)
        complete = True
    else:
        evaluation = EvaluationRun.objects.filter(pk=run_id, scanner=scanner).first()
        if evaluation is None:
            raise ReportNotFound(f"run: no run #{run_id} of scanner {scanner_name!r}")
        latest = (
            AuditRepoResult.objects.filter(run=evaluation)
            .values("repo_id")
            .annotate(latest=Max("id"))
            .values("latest")
        )
        rows = list(
            AuditRepoResult.objects.filter(id__in=latest).select_related("repo", "scan_result")
        )
        run = run_id
        complete = evaluation.is_complete and all(r.is_complete for r in rows)
    report = build_report(
        scanner=scanner.name,
        run=run,
        repo_rows=[r.metrics for r in rows],
        is_complete=complete,
    )
    # Which version of the scanner's results each repo's figures judged.
    report["scan_versions"] = {
        r.repo.project_id: r.scan_result.version
        for r in sorted(rows, key=lambda r: r.repo.project_id)
        if r.scan_result is not None
    }
    return report


@dataclass
class RepoSection:
    repo: Any
    metrics: dict[str, Any] | None
    is_complete: bool
    notes: list[str]
    show_truth_text: bool
    rows: list[dict[str, Any]] = field(default_factory=list)
    # The scan result version this run judged on the repo, and whether it is still current.
    scan_version: int | None = None
    scan_is_current: bool = True

    @property
    def percent(self) -> dict[str, str]:
        """Ratios as percentages; "—" for a repo with unjudged truth findings."""
        return {k: pct(self.metrics[k]) for k in RATIO_KEYS} if self.metrics else {}

    @property
    def judged_text(self) -> str:
        """``incomplete: X of Y truth findings judged`` when the metrics are incomplete."""
        if not self.metrics or is_row_complete(self.metrics):
            return ""
        return (
            f"incomplete: {judged(self.metrics)} of {self.metrics['truth']} truth findings judged"
        )


def audit_run_detail(*, user: Any, run_id: int) -> tuple[EvaluationRun, list[RepoSection]]:
    """A run with per-repo tables of truth results; hidden truth text is left out."""
    run = visible_runs(user).filter(benchmark="audit").get(pk=run_id)
    latest_repo = (
        AuditRepoResult.objects.filter(run=run)
        .values("repo_id")
        .annotate(latest=Max("id"))
        .values("latest")
    )
    repo_results = {r.repo_id: r for r in AuditRepoResult.objects.filter(id__in=latest_repo)}
    judged = {
        p.repo_id: p.scan_result
        for p in AuditRunScan.objects.filter(run=run).select_related("scan_result")
    }
    results = (
        AuditTruthResult.objects.filter(run=run)
        .select_related("truth_finding", "scan_finding", "repo")
        .order_by("repo__project_id", "truth_finding__order", "id")
    )
    latest: dict[int, AuditTruthResult] = {}
    for r in results:
        previous = latest.get(r.truth_finding_id)
        # A final outcome wins over an earlier judge failure of the same finding.
        if previous is None or previous.outcome == MatchOutcome.JUDGE_FAILED:
            latest[r.truth_finding_id] = r
    sections: dict[int, RepoSection] = {}
    for repo in run.repos.order_by("project_id"):
        rr = repo_results.get(repo.pk)
        version = judged.get(repo.pk)
        sections[repo.pk] = RepoSection(
            repo=repo,
            metrics=as_shown(rr.metrics) if rr else None,
            is_complete=bool(rr and rr.is_complete),
            notes=list(rr.notes) if rr else [],
            show_truth_text=truth_details_visible(user, repo),
            scan_version=version.version if version else None,
            scan_is_current=version.is_current if version else True,
        )
    ordered: dict[int, list[tuple[tuple[int, int], dict[str, Any]]]] = defaultdict(list)
    for r in latest.values():
        section = sections.get(r.repo_id)
        if section is None:
            continue
        dropped = section.metrics and r.truth_finding_id in section.metrics.get(
            "dropped_partials", []
        )
        ordered[r.repo_id].append(
            (
                (r.truth_finding.order, r.truth_finding_id),
                {
                    "finding_id": r.truth_finding.finding_id,
                    "title": r.truth_finding.title,
                    "severity": r.truth_finding.severity,
                    "outcome": r.outcome,
                    "outcome_label": r.get_outcome_display(),
                    "dropped": bool(dropped),
                    "scan_index": r.scan_finding.index if r.scan_finding else None,
                    "scan_title": r.scan_finding.title if r.scan_finding else "",
                    "explanation": r.explanation if section.show_truth_text else "",
                    "votes": len(r.votes),
                },
            )
        )
    # A judge failure stops a repo; the truth findings after it have no result until the run
    # is resumed. They are listed so that the table accounts for every truth finding.
    stopped = [pk for pk, s in sections.items() if s.metrics is not None and not s.is_complete]
    for t in TruthFinding.objects.filter(repo_id__in=stopped).exclude(pk__in=latest.keys()):
        ordered[t.repo_id].append(
            (
                (t.order, t.pk),
                {
                    "finding_id": t.finding_id,
                    "title": t.title,
                    "severity": t.severity,
                    "outcome": NOT_JUDGED,
                    "outcome_label": "Not judged yet",
                    "dropped": False,
                    "scan_index": None,
                    "scan_title": "",
                    "explanation": "",
                    "votes": 0,
                },
            )
        )
    for repo_id, rows in ordered.items():
        sections[repo_id].rows = [row for _, row in sorted(rows, key=lambda item: item[0])]
    return run, list(sections.values())


# --- participants' submissions ----------------------------------------------------------------


@dataclass(frozen=True)
class AuditSubmissionQuota:
    """A participant's audit submissions today (UTC day); ``daily_limit`` None: no limit."""

    daily_limit: int | None
    used_today: int
    resets_at: datetime

    @property
    def remaining(self) -> int | None:
        if self.daily_limit is None:
            return None
        return max(0, self.daily_limit - self.used_today)

    @property
    def exceeded_message(self) -> str:
        return (
            f"the daily limit of {self.daily_limit} audit submission(s) is reached "
            f"({self.used_today} today); the next one is possible after "
            f"{self.resets_at:%Y-%m-%d %H:%M} UTC"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "daily_limit": self.daily_limit,
            "used_today": self.used_today,
            "remaining": self.remaining,
            "resets_at": self.resets_at.isoformat(),
        }


def audit_daily_limit() -> int | None:
    """``AUDIT_DAILY_SUBMISSIONS`` (default 10; None: unlimited; 0: none allowed)."""
    value = getattr(settings, "AUDIT_DAILY_SUBMISSIONS", 10)
    return None if value is None else max(0, int(value))


def audit_submission_quota(*, user: Any, now: datetime | None = None) -> AuditSubmissionQuota:
    """Every audit run the user created today counts, whatever became of it: a run that the
    judge failed still cost its calls. Refused submissions store no run and do not count."""
    now = now or timezone.now()
    day_start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    used = EvaluationRun.objects.filter(
        benchmark=Benchmark.AUDIT,
        created_by_id=getattr(user, "pk", None),
        created_at__gte=day_start,
    ).count()
    return AuditSubmissionQuota(
        daily_limit=audit_daily_limit(),
        used_today=used,
        resets_at=day_start + timedelta(days=1),
    )
