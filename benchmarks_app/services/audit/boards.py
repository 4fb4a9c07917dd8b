"""Audit boards: one per (dataset release, judge), stored row by row when a run ends.

A board holds, per scanner, each repo's latest complete evaluation by runs of that release and
judge whose judged results are still the scanner's current ones (see
:mod:`benchmarks_app.selectors.audit_boards`), summed over repos, with the bootstrap interval
of F1 with partial, the rank and the rank range (:mod:`scoring.audit.board`). A scanner is
ranked only when it was evaluated on every repo of the release; the others are listed below
with their coverage.

The rows are derived data, rebuilt from the appended results: :func:`audit_board_refresh`
writes the whole board in one transaction (the release row is locked, so two runs ending at
once write it one after the other). A row's interval is recomputed only when the repo
results it sums change, so a run that ends costs one interval, not one per scanner.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import transaction

from benchmarks_app.models import AuditRepoResult, Benchmark, EvaluationRun, Scanner
from benchmarks_app.models.audit import AuditBoardRow, DatasetRelease
from benchmarks_app.selectors.audit_boards import (
    board_judge_key,
    board_repo_results,
    release_repo_ids,
)
from scoring.audit.board import (
    BOARD_LEVEL,
    BOARD_RESAMPLES,
    BOARD_SEED,
    BoardEntry,
    f1_with_partial_interval,
    rank_board,
)
from scoring.audit.metrics import overall

# Keys of a repo's metrics that mean nothing summed over a complete board row.
_DROPPED_KEYS = (
    "repo",
    "truth_severity_counts",
    "scan_severity_counts",
    "judge_failed",
    "not_judged",
    "dropped_partials",
)


def _totals(rows: list[AuditRepoResult]) -> dict[str, Any]:
    totals = overall([r.metrics for r in rows])
    for key in _DROPPED_KEYS:
        totals.pop(key, None)
    return totals


def _interval_fields(rows: list[AuditRepoResult], previous: AuditBoardRow | None) -> dict[str, Any]:
    ids = sorted(r.pk for r in rows)
    if (
        previous is not None
        and previous.repo_result_ids == ids
        and previous.ci_resamples == BOARD_RESAMPLES
        and previous.ci_seed == BOARD_SEED
    ):
        return {
            "ci_low": previous.ci_low,
            "ci_high": previous.ci_high,
            "ci_level": previous.ci_level,
            "ci_resamples": previous.ci_resamples,
            "ci_seed": previous.ci_seed,
        }
    interval = f1_with_partial_interval(
        [r.metrics for r in rows], resamples=BOARD_RESAMPLES, level=BOARD_LEVEL, seed=BOARD_SEED
    )
    return {
        "ci_low": interval.low if interval else None,
        "ci_high": interval.high if interval else None,
        "ci_level": BOARD_LEVEL,
        "ci_resamples": BOARD_RESAMPLES,
        "ci_seed": BOARD_SEED,
    }


@transaction.atomic
def audit_board_refresh(*, release: DatasetRelease, judge: str) -> list[AuditBoardRow]:
    """Rewrite the board of ``release`` and ``judge`` (a board judge key) from the results."""
    DatasetRelease.objects.select_for_update().filter(pk=release.pk).first()
    repos_total = len(release_repo_ids(release))
    by_scanner: dict[int, list[AuditRepoResult]] = defaultdict(list)
    for result in board_repo_results(release=release, judge=judge):
        by_scanner[result.scanner_id].append(result)
    previous = {
        row.scanner_id: row for row in AuditBoardRow.objects.filter(release=release, judge=judge)
    }
    names = dict(Scanner.objects.filter(pk__in=by_scanner).values_list("pk", "name"))
    fields: dict[int, dict[str, Any]] = {}
    entries = []
    for scanner_id, rows in by_scanner.items():
        totals = _totals(rows)
        complete = len(rows) >= repos_total > 0
        fields[scanner_id] = {
            "run_ids": sorted({r.run_id for r in rows}),
            "repo_result_ids": sorted(r.pk for r in rows),
            "repos_evaluated": len(rows),
            "repos_total": repos_total,
            "is_complete": complete,
            "metrics": totals,
            "f1_with_partial": totals.get("f1_with_partial"),
            **_interval_fields(rows, previous.get(scanner_id)),
        }
        low, high = fields[scanner_id]["ci_low"], fields[scanner_id]["ci_high"]
        entries.append(
            BoardEntry(
                scanner=names[scanner_id],
                complete=complete,
                repos_evaluated=len(rows),
                f1_with_partial=totals.get("f1_with_partial"),
                f1=totals.get("f1"),
                ci=(low, high) if low is not None and high is not None else None,
            )
        )
    ids = {name: pk for pk, name in names.items()}
    AuditBoardRow.objects.filter(release=release, judge=judge).delete()
    created = AuditBoardRow.objects.bulk_create(
        AuditBoardRow(
            release=release,
            judge=judge,
            scanner_id=ids[entry.scanner],
            position=position,
            rank=entry.rank,
            rank_low=entry.rank_low,
            rank_high=entry.rank_high,
            tied_with_above=entry.tied_with_above,
            **fields[ids[entry.scanner]],
        )
        for position, entry in enumerate(rank_board(entries), start=1)
    )
    return created


def audit_board_refresh_for_run(*, run: EvaluationRun) -> list[AuditBoardRow]:
    """Rewrite the board a finished audit run counts on (none for runs without a release)."""
    if run.benchmark != Benchmark.AUDIT or run.release_id is None:
        return []
    release = DatasetRelease.objects.get(pk=run.release_id)
    return audit_board_refresh(release=release, judge=board_judge_key(run))


def audit_boards_refresh_for_scanners(*, scanner_ids: Iterable[int]) -> int:
    """Rewrite every board a scanner is on, after its current results changed (an import made
    another version current: the board no longer counts the runs of the old one)."""
    boards = set(
        AuditBoardRow.objects.filter(scanner_id__in=list(scanner_ids)).values_list(
            "release_id", "judge"
        )
    )
    releases = DatasetRelease.objects.in_bulk({release_id for release_id, _ in boards})
    for release_id, judge in sorted(boards):
        audit_board_refresh(release=releases[release_id], judge=judge)
    return len(boards)


def audit_boards_refresh_all() -> int:
    """Rewrite every board that has runs (after a change of how boards are computed)."""
    pairs = {
        (run.release_id, board_judge_key(run))
        for run in EvaluationRun.objects.filter(
            benchmark=Benchmark.AUDIT, release__isnull=False
        ).only("id", "release_id", "judge", "judge_config")
    }
    releases = DatasetRelease.objects.in_bulk({release_id for release_id, _ in pairs})
    for release_id, judge in sorted(pairs):
        audit_board_refresh(release=releases[release_id], judge=judge)
    return len(pairs)
