"""Audit boards: one per (dataset release, judge), stored row by row when a run ends.

A board holds, per scanner, each repo's latest complete evaluation by runs of that release and
judge whose judged results are still the scanner's current ones (see
:mod:`benchmarks_app.selectors.audit_boards`), summed over repos, with the bootstrap interval
of F1 with partial, the rank and the rank range (:mod:`scoring.audit.board`). A scanner is
ranked only when it was evaluated on every repo of the release; the others are listed below
with their coverage.

A release with phases also has one board per phase (rows with ``phase`` set), of that
phase's runs only; a run of a phase rewrites both its phase's board and the release's whole
board. Where a scanner's owner chose a run for a board (``board_choice``), that run's results
stand for the scanner there instead of the latest ones. Each row also carries the method
(name, description, link) of the run that stands for the scanner, in its metrics document.

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

from benchmarks_app.models import AuditRepoResult, Benchmark, EvaluationRun, Phase, Scanner
from benchmarks_app.models.audit import AuditBoardRow, DatasetRelease
from benchmarks_app.selectors.audit_boards import (
    board_chosen_runs,
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


METHOD_FIELDS = ("method_name", "method_description", "method_url")


def _methods(
    by_scanner: dict[int, list[AuditRepoResult]], chosen: dict[int, int]
) -> dict[int, dict[str, str]]:
    """Per scanner, the method of its chosen run, else of its latest counted run."""
    standing = {
        scanner_id: chosen.get(scanner_id, max(r.run_id for r in rows))
        for scanner_id, rows in by_scanner.items()
    }
    runs = {
        values["pk"]: values
        for values in EvaluationRun.objects.filter(pk__in=set(standing.values())).values(
            "pk", *METHOD_FIELDS
        )
    }
    return {
        scanner_id: {f: runs[run_id][f] for f in METHOD_FIELDS}
        for scanner_id, run_id in standing.items()
        if run_id in runs
    }


@transaction.atomic
def audit_board_refresh(
    *, release: DatasetRelease, judge: str, phase: Phase | None = None
) -> list[AuditBoardRow]:
    """Rewrite the board of ``release`` and ``judge`` (a board judge key) from the results:
    the release's whole board, or with ``phase`` the board of that phase's runs."""
    DatasetRelease.objects.select_for_update().filter(pk=release.pk).first()
    repos_total = len(release_repo_ids(release))
    by_scanner: dict[int, list[AuditRepoResult]] = defaultdict(list)
    for result in board_repo_results(release=release, judge=judge, phase=phase):
        by_scanner[result.scanner_id].append(result)
    board = AuditBoardRow.objects.filter(release=release, judge=judge, phase=phase)
    previous = {row.scanner_id: row for row in board}
    methods = _methods(by_scanner, board_chosen_runs(release=release, judge=judge, phase=phase))
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
            "metrics": {**totals, **methods.get(scanner_id, {})},
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
    board.delete()
    created = AuditBoardRow.objects.bulk_create(
        AuditBoardRow(
            release=release,
            judge=judge,
            phase=phase,
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
    """Rewrite the boards a finished audit run counts on: its release's whole board and, for a
    run of a phase, that phase's board (none for runs without a release). Returns the rows of
    the whole board."""
    if run.benchmark != Benchmark.AUDIT or run.release_id is None:
        return []
    release = DatasetRelease.objects.get(pk=run.release_id)
    judge = board_judge_key(run)
    if run.phase_id is not None:
        phase = Phase.objects.get(pk=run.phase_id)
        audit_board_refresh(release=release, judge=judge, phase=phase)
    return audit_board_refresh(release=release, judge=judge)


def _refresh_boards(boards: Iterable[tuple[int, str, int | None]]) -> int:
    boards = sorted(set(boards), key=lambda b: (b[0], b[1], b[2] or 0))
    releases = DatasetRelease.objects.in_bulk({release_id for release_id, _, _ in boards})
    phases = Phase.objects.in_bulk({p for _, _, p in boards if p is not None})
    for release_id, judge, phase_id in boards:
        audit_board_refresh(
            release=releases[release_id],
            judge=judge,
            phase=phases[phase_id] if phase_id is not None else None,
        )
    return len(boards)


def audit_boards_refresh_for_scanners(*, scanner_ids: Iterable[int]) -> int:
    """Rewrite every board a scanner is on, after its current results changed (an import made
    another version current: the board no longer counts the runs of the old one)."""
    return _refresh_boards(
        AuditBoardRow.objects.filter(scanner_id__in=list(scanner_ids)).values_list(
            "release_id", "judge", "phase_id"
        )
    )


def audit_boards_refresh_for_release(*, release: DatasetRelease) -> int:
    """Rewrite every board of ``release`` (whole and per phase), after its phases changed."""
    return _refresh_boards(
        (release.pk, board_judge_key(run), phase_id)
        for run in EvaluationRun.objects.filter(benchmark=Benchmark.AUDIT, release=release).only(
            "id", "judge", "judge_config", "phase_id"
        )
        for phase_id in {None, run.phase_id}
    )


def audit_boards_refresh_for_phase(*, phase: Phase) -> int:
    """After a release phase is revealed, hidden again or its dates change."""
    if phase.release_id is None:
        return 0
    return audit_boards_refresh_for_release(release=DatasetRelease.objects.get(pk=phase.release_id))


def audit_boards_refresh_all() -> int:
    """Rewrite every board that has runs (after a change of how boards are computed)."""
    return _refresh_boards(
        (int(run.release_id or 0), board_judge_key(run), phase_id)
        for run in EvaluationRun.objects.filter(
            benchmark=Benchmark.AUDIT, release__isnull=False
        ).only("id", "release_id", "judge", "judge_config", "phase_id")
        for phase_id in {None, run.phase_id}
    )
