"""Audit reads: the boards, the report document and the run page.

A board is one (dataset release, judge) pair (:mod:`benchmarks_app.selectors.audit_boards`):
per scanner, each repo's latest complete evaluation by that release and judge whose judged
results are still the scanner's current ones. A report covers one run, or one scanner's row
on one board; it never mixes releases or judges.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Max

from benchmarks_app.models import (
    AuditRepoResult,
    AuditTruthResult,
    EvaluationRun,
    JudgeCall,
    MatchOutcome,
    Scanner,
    TruthFinding,
)
from benchmarks_app.models.audit import AuditBoardRow, AuditRunScan
from benchmarks_app.selectors.audit_board_results import board_judge_key
from benchmarks_app.selectors.audit_boards import (
    Board,
    BoardNotFound,
    audit_leaderboard,
    resolve_board,
)
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, attach_marks
from benchmarks_app.selectors.visibility import (
    truth_details_visible,
    visible_runs,
    visible_scanners,
)
from scoring.audit.metrics import (
    RATIO_KEYS,
    as_shown,
    build_report,
    is_row_complete,
    judged,
    pct,
)

__all__ = [
    "NOT_JUDGED",
    "RUN_PAGE_REPOS",
    "RUN_PAGE_ROWS",
    "BoardNotFound",
    "RepoSection",
    "ReportNotFound",
    "RunPage",
    "audit_leaderboard",
    "audit_report",
    "audit_run_detail",
    "run_judge_calls",
]

# The run page's outcome for truth findings left behind a judge failure (never stored).
NOT_JUDGED = "not_judged"


class ReportNotFound(LookupError):
    pass


def _scan_versions(rows: list[AuditRepoResult]) -> dict[str, int]:
    """Which version of the scanner's results each repo's figures judged."""
    return {
        r.repo.project_id: r.scan_result.version
        for r in sorted(rows, key=lambda r: r.repo.project_id)
        if r.scan_result is not None
    }


# ``user`` of the readers below when the caller is the command line: no phase is hidden.
EVERYONE: Any = object()


def _run_report(scanner: Scanner, run_id: int, user: Any = EVERYONE) -> dict[str, Any]:
    # The policy's runs (a hidden phase's only to their entrant and staff); the command line
    # (EVERYONE) reads them all.
    runs = (EvaluationRun.objects.all() if user is EVERYONE else visible_runs(user)).filter(
        scanner=scanner
    )
    evaluation = runs.filter(pk=run_id).first()
    if evaluation is None:
        raise ReportNotFound(f"run: no run #{run_id} of scanner {scanner.name!r}")
    latest = (
        AuditRepoResult.objects.filter(run=evaluation)
        .values("repo_id")
        .annotate(latest=Max("id"))
        .values("latest")
    )
    rows = list(AuditRepoResult.objects.filter(id__in=latest).select_related("repo", "scan_result"))
    report = build_report(
        scanner=scanner.name,
        run=run_id,
        repo_rows=[r.metrics for r in rows],
        is_complete=evaluation.is_complete and all(r.is_complete for r in rows),
    )
    report["release"] = str(evaluation.release) if evaluation.release_id else None
    report["judge"] = board_judge_key(evaluation)
    report["scan_versions"] = _scan_versions(rows)
    return report


def _report_board(scanner: Scanner, board: Board, judge_given: bool) -> Board:
    """The board to report on: the official judge's, unless the scanner is only on another."""
    if (
        judge_given
        or AuditBoardRow.objects.on_phase(None)
        .filter(release=board.release, judge=board.judge, scanner=scanner)
        .exists()
    ):
        return board
    judges = sorted(
        set(
            AuditBoardRow.objects.on_phase(None)
            .filter(release=board.release, scanner=scanner)
            .values_list("judge", flat=True)
        )
    )
    if len(judges) == 1:
        board.judge = judges[0]
    elif judges:
        raise ReportNotFound(
            f"judge: {scanner.name!r} was evaluated on {board.release} with several judges "
            f"({', '.join(judges)}); choose one"
        )
    return board


def audit_report(
    *,
    scanner_name: str,
    run_id: int | None = None,
    dataset: str | None = None,
    release: int | str | None = None,
    judge: str | None = None,
    user: Any = EVERYONE,
) -> dict[str, Any]:
    """The JSON document of ``audit_report``: one run, or the scanner's row on one board
    (by default the official release and judge; see :func:`scoring.audit.metrics.build_report`).
    A run of a hidden phase is reported to ``user`` only if they are staff or own the scanner.
    """
    scanners = Scanner.objects.all() if user is EVERYONE else visible_scanners(user)
    scanner = scanners.filter(name=scanner_name).first()
    if scanner is None:
        # The same answer for a hidden phase's entrant as for a name nobody uses.
        raise ReportNotFound(f"scanner: no scanner named {scanner_name!r}")
    if run_id is not None:
        return _run_report(scanner, run_id, user)
    try:
        board = resolve_board(dataset=dataset, release=release, judge=judge)
    except BoardNotFound as exc:
        raise ReportNotFound(str(exc)) from None
    if board is None:
        report = build_report(scanner=scanner.name, run=None, repo_rows=[])
        return {**report, "release": None, "judge": None, "scan_versions": {}}
    board = _report_board(scanner, board, judge_given=bool(judge))
    row = (
        AuditBoardRow.objects.on_phase(None)
        .filter(release=board.release, judge=board.judge, scanner=scanner)
        .first()
    )
    rows = (
        list(
            AuditRepoResult.objects.filter(pk__in=row.repo_result_ids).select_related(
                "repo", "scan_result"
            )
        )
        if row is not None
        else []
    )
    run_ids = sorted({r.run_id for r in rows})
    report = build_report(
        scanner=scanner.name,
        run=run_ids[0] if len(run_ids) == 1 else (run_ids or None),
        repo_rows=[r.metrics for r in rows],
        is_complete=True,
    )
    report["release"] = str(board.release)
    report["judge"] = board.judge
    report["scan_versions"] = _scan_versions(rows)
    if row is not None:
        attach_marks(AUDIT_SHAPE, [row])
        report["board"] = {
            "rank": row.rank,
            "rank_low": row.rank_low,
            "rank_high": row.rank_high,
            "complete": row.is_complete,
            "repos_evaluated": row.repos_evaluated,
            "repos_total": row.repos_total,
            "f1_with_partial_ci": ([row.ci_low, row.ci_high] if row.ci_low is not None else None),
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
    # Whether the page shows this repo's truth-finding rows (see RUN_PAGE_ROWS), and which of
    # their pages.
    is_open: bool = True
    truth_count: int = 0
    row_page: int = 1
    row_pages: int = 1

    @property
    def percent(self) -> dict[str, str]:
        """Ratios as percentages; "—" for a repo with unjudged truth findings."""
        shown = as_shown(self.metrics) if self.metrics else {}
        return {k: pct(shown.get(k)) for k in RATIO_KEYS} if shown else {}

    @property
    def judged_text(self) -> str:
        """``incomplete: X of Y truth findings judged`` when the metrics are incomplete."""
        if not self.metrics or is_row_complete(self.metrics):
            return ""
        return (
            f"incomplete: {judged(self.metrics)} of {self.metrics.get('truth', 0)} "
            "truth findings judged"
        )


# A run page holds at most this many truth-finding rows and repo sections, however large the
# run (a ScaBench-sized run rendered every truth finding: megabytes): repos are opened in order
# while their truth findings fit, the others are a link to their own page (``?repo=``), which
# pages its rows; the repo sections themselves are paged too (``?repos=``).
RUN_PAGE_ROWS = 200
RUN_PAGE_REPOS = 50


@dataclass(frozen=True)
class RunPage:
    """Which part of a run its page shows: one repo (``repo``, rows page ``page``), or the
    repo sections of page ``repos_page`` with as many repos opened as fit."""

    repo: str | None = None
    page: int = 1
    repos_page: int = 1


def _opened(sections: list[RepoSection], counts: dict[int, int], view: RunPage) -> set[int]:
    if view.repo is not None:
        return {s.repo.pk for s in sections if s.repo.project_id == view.repo}
    opened: set[int] = set()
    budget = RUN_PAGE_ROWS
    for section in sections:
        count = counts.get(section.repo.pk, 0)
        if opened and count > budget:
            break
        opened.add(section.repo.pk)
        budget -= count
    return opened


def audit_run_detail(
    *, user: Any, run_id: int, view: RunPage | None = None
) -> tuple[EvaluationRun, list[RepoSection]]:
    """A run with per-repo tables of truth results, bounded in size (:data:`RUN_PAGE_ROWS`,
    :data:`RUN_PAGE_REPOS`); hidden truth text is left out."""
    view = view or RunPage()
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
    repos = list(run.repos.order_by("project_id"))
    if view.repo is not None:
        repos = [r for r in repos if r.project_id == view.repo]
        if not repos:
            raise EvaluationRun.DoesNotExist(f"repo: run #{run.pk} has no repo {view.repo!r}")
    else:
        start = (max(view.repos_page, 1) - 1) * RUN_PAGE_REPOS
        repos = repos[start : start + RUN_PAGE_REPOS]
    # What each repo's table would hold, judged or not yet (a run in progress has no repo
    # results for the repos still being judged).
    truths = TruthFinding.objects.filter(repo__in=repos)
    truths = truths.filter(releases=run.release_id) if run.release_id else truths.current()
    truth_counts = dict(
        truths.order_by().values("repo_id").annotate(n=Count("id")).values_list("repo_id", "n")
    )
    sections: dict[int, RepoSection] = {}
    for repo in repos:
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
    opened = _opened(list(sections.values()), truth_counts, view)
    for pk, shown in sections.items():
        shown.is_open = pk in opened
        shown.truth_count = truth_counts.get(pk, 0)
    results = (
        AuditTruthResult.objects.filter(run=run, repo_id__in=opened)
        .select_related("truth_finding", "scan_finding", "repo")
        .order_by("repo__project_id", "truth_finding__order", "id")
    )
    latest: dict[int, AuditTruthResult] = {}
    for r in results:
        previous = latest.get(r.truth_finding_id)
        # A final outcome wins over an earlier judge failure of the same finding.
        if previous is None or previous.outcome == MatchOutcome.JUDGE_FAILED:
            latest[r.truth_finding_id] = r
    ordered: dict[int, list[tuple[tuple[int, int], dict[str, Any]]]] = defaultdict(list)
    for r in latest.values():
        section = sections.get(r.repo_id)
        if section is None or r.repo_id not in opened:
            continue
        dropped = section.metrics and r.truth_finding_id in section.metrics.get(
            "dropped_partials", []
        )
        ordered[r.repo_id].append(
            (
                (r.truth_finding.order, r.truth_finding_id),
                {
                    "finding_id": r.truth_finding.finding_id,
                    "title": r.truth_finding.title if section.show_truth_text else "",
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
    stopped = [
        pk
        for pk, s in sections.items()
        if s.metrics is not None and not s.is_complete and pk in opened
    ]
    pending = TruthFinding.objects.filter(repo_id__in=stopped).exclude(pk__in=latest.keys())
    pending = pending.filter(releases=run.release_id) if run.release_id else pending.current()
    for t in pending:
        ordered[t.repo_id].append(
            (
                (t.order, t.pk),
                {
                    "finding_id": t.finding_id,
                    "title": t.title if sections[t.repo_id].show_truth_text else "",
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
        section = sections[repo_id]
        ordered_rows = [row for _, row in sorted(rows, key=lambda item: item[0])]
        section.row_pages = max(1, -(-len(ordered_rows) // RUN_PAGE_ROWS))
        section.row_page = min(max(view.page, 1), section.row_pages)
        first = (section.row_page - 1) * RUN_PAGE_ROWS
        section.rows = ordered_rows[first : first + RUN_PAGE_ROWS]
    return run, list(sections.values())


# Ledger statuses of requests actually sent to the judge (a cached verdict cost nothing).
NEW_CALL_STATUSES = ("ok", "invalid", "truncated", "error")


def run_judge_calls(*, run: EvaluationRun) -> tuple[int, int]:
    """(new requests, cached answers) in the run's judge ledger."""
    counts = dict(
        JudgeCall.objects.filter(run=run)
        .values("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    return sum(counts.get(s, 0) for s in NEW_CALL_STATUSES), counts.get("cached", 0)
