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
results it sums change, so a run that ends costs one interval, not one per scanner; it writes
that scanner's row and the ties of its neighbours (:func:`audit_board_update`). Places, ranks
and rank ranges are counted when the board is read (:mod:`benchmarks_app.selectors.board_marks`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import transaction

from benchmarks_app.models import AuditRepoResult, Benchmark, EvaluationRun, Phase, Scanner
from benchmarks_app.models.audit import (
    AuditBoardRow,
    DatasetRelease,
    audit_board_sort_fields,
    audit_metric_columns,
)
from benchmarks_app.selectors.audit_board_results import (
    board_chosen_runs,
    board_judge_key,
    board_repo_results,
    release_repo_ids,
)
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, key_of, ties_all
from benchmarks_app.services.board_ties import board_row_delete, board_row_save
from scoring.audit.board import (
    BOARD_LEVEL,
    BOARD_RESAMPLES,
    BOARD_SEED,
    f1_with_partial_interval,
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


def _row_fields(
    rows: list[AuditRepoResult],
    *,
    repos_total: int,
    previous: AuditBoardRow | None,
    method: dict[str, str],
) -> dict[str, Any]:
    """A scanner's stored row (all but its place on the board) from the repo results it sums."""
    totals = _totals(rows)
    return {
        "run_ids": sorted({r.run_id for r in rows}),
        "repo_result_ids": sorted(r.pk for r in rows),
        "repos_evaluated": len(rows),
        "repos_total": repos_total,
        "is_complete": len(rows) >= repos_total > 0,
        "metrics": {**totals, **method},
        "f1_with_partial": totals.get("f1_with_partial"),
        "f1": totals.get("f1"),
        **audit_metric_columns(totals),
        **_interval_fields(rows, previous),
    }


def _sort_fields(fields: dict[str, Any], scanner_name: str) -> dict[str, Any]:
    return audit_board_sort_fields(
        scanner_name=scanner_name,
        is_complete=fields["is_complete"],
        repos_evaluated=fields["repos_evaluated"],
        f1_with_partial=fields["f1_with_partial"],
        f1=fields["f1"],
        ci_low=fields["ci_low"],
        ci_high=fields["ci_high"],
    )


@transaction.atomic
def audit_board_refresh(
    *, release: DatasetRelease, judge: str, phase: Phase | None = None
) -> list[AuditBoardRow]:
    """Rewrite the board of ``release`` and ``judge`` (a board judge key) from the results:
    the release's whole board, or with ``phase`` the board of that phase's runs."""
    DatasetRelease.objects.select_for_update(no_key=True).filter(pk=release.pk).first()
    repos_total = len(release_repo_ids(release))
    by_scanner: dict[int, list[AuditRepoResult]] = defaultdict(list)
    for result in board_repo_results(release=release, judge=judge, phase=phase):
        by_scanner[result.scanner_id].append(result)
    board = AuditBoardRow.objects.on_phase(phase).filter(release=release, judge=judge)
    previous = {row.scanner_id: row for row in board}
    methods = _methods(by_scanner, board_chosen_runs(release=release, judge=judge, phase=phase))
    names = dict(Scanner.objects.filter(pk__in=by_scanner).values_list("pk", "name"))
    rows = []
    for scanner_id, results in by_scanner.items():
        fields = _row_fields(
            results,
            repos_total=repos_total,
            previous=previous.get(scanner_id),
            method=methods.get(scanner_id, {}),
        )
        rows.append(
            AuditBoardRow(
                release=release,
                judge=judge,
                phase=phase,
                scanner_id=scanner_id,
                **fields,
                **_sort_fields(fields, names[scanner_id]),
            )
        )
    ties_all(AUDIT_SHAPE, rows)
    board.delete()
    rows.sort(key=lambda row: key_of(AUDIT_SHAPE, row)[:-1])
    return AuditBoardRow.objects.bulk_create(rows, batch_size=2_000)


@transaction.atomic
def audit_board_update(
    *, release: DatasetRelease, judge: str, scanner_id: int, phase: Phase | None = None
) -> int:
    """Bring one scanner's row of a board up to date with its results (what a run's end
    changes); the number of rows written.

    The scanner's row alone is rebuilt from results (its interval only if the results it sums
    changed); the other rows keep theirs. Places, ranks and rank ranges are counted when the
    board is read (:mod:`benchmarks_app.selectors.board_marks`), so only the ties of the rows
    next to where the row was and where it is now can change, and are written. The release
    row is locked meanwhile, as by the full refresh, so two runs ending at once update the
    board one after the other; readers never wait for it.
    """
    DatasetRelease.objects.select_for_update(no_key=True).filter(pk=release.pk).first()
    board = AuditBoardRow.objects.on_phase(phase).filter(release=release, judge=judge)
    repos_total = len(release_repo_ids(release))
    stored_total = board.order_by().values_list("repos_total", flat=True).first()
    if stored_total is not None and stored_total != repos_total:
        # The release's repos changed since the board was written: every row's coverage did.
        return len(audit_board_refresh(release=release, judge=judge, phase=phase))
    rows = board_repo_results(release=release, judge=judge, phase=phase, scanner_id=scanner_id)
    previous = board.filter(scanner_id=scanner_id).select_related("scanner").first()
    old_key = key_of(AUDIT_SHAPE, previous) if previous is not None else None
    if rows:
        method = _methods(
            {scanner_id: rows},
            board_chosen_runs(release=release, judge=judge, phase=phase, scanner_id=scanner_id),
        ).get(scanner_id, {})
        fields = _row_fields(rows, repos_total=repos_total, previous=previous, method=method)
        if previous is None:
            previous = AuditBoardRow(
                release=release, judge=judge, phase=phase, scanner_id=scanner_id
            )
        # The scanner came with the stored row; a new row reads it.
        name = previous.scanner.name
        for field, value in {**fields, **_sort_fields(fields, name)}.items():
            setattr(previous, field, value)
        return board_row_save(shape=AUDIT_SHAPE, row=previous, old_key=old_key)
    if previous is not None:
        return board_row_delete(shape=AUDIT_SHAPE, row=previous)
    return 0


def audit_board_refresh_for_run(*, run: EvaluationRun) -> int:
    """Update the boards a finished audit run counts on: its release's whole board and, for a
    run of a phase, that phase's board (none for runs without a release). Returns the number
    of rows written."""
    if run.benchmark != Benchmark.AUDIT or run.release_id is None:
        return 0
    release = DatasetRelease.objects.get(pk=run.release_id)
    judge = board_judge_key(run)
    phase = Phase.objects.get(pk=run.phase_id) if run.phase_id is not None else None
    if run.scanner_id is None:
        written = len(audit_board_refresh(release=release, judge=judge, phase=phase))
        return written + (len(audit_board_refresh(release=release, judge=judge)) if phase else 0)
    # Only the run's scanner's results changed: its row, then the board's ranks.
    written = 0
    for board_phase in [phase, None] if phase is not None else [None]:
        written += audit_board_update(
            release=release, judge=judge, phase=board_phase, scanner_id=run.scanner_id
        )
    return written


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


# Up to this many scanners changed, their rows are brought up to date one by one; past it
# (a dataset imported whole) every board they are on is rewritten.
SCANNERS_UPDATED_ONE_BY_ONE = 20


def audit_boards_refresh_for_scanners(*, scanner_ids: Iterable[int]) -> int:
    """Update every board a scanner is on, after its current results changed (an import made
    another version current: the board no longer counts the runs of the old one); the number
    of boards.

    A participant's upload changes one scanner: its rows alone are rebuilt, as a run's end
    does (:func:`audit_board_update`, which gives what the whole-board rewrite gives). The
    rewrite deleted and inserted every row of every such board inside the upload's
    transaction, so under a deadline rush twenty uploads and the workers' run ends all
    wrote the same rows, and PostgreSQL aborted some of them as deadlocked."""
    ids = sorted(set(scanner_ids))
    boards = sorted(
        set(
            AuditBoardRow.objects.filter(scanner_id__in=ids).values_list(
                "release_id", "judge", "phase_id"
            )
        ),
        # The order every writer locks releases in: no two of them wait on each other.
        key=lambda b: (b[0], b[1], b[2] or 0),
    )
    if len(ids) > SCANNERS_UPDATED_ONE_BY_ONE:
        return _refresh_boards(boards)
    releases = DatasetRelease.objects.in_bulk({release_id for release_id, _, _ in boards})
    phases = Phase.objects.in_bulk({p for _, _, p in boards if p is not None})
    for release_id, judge, phase_id in boards:
        for scanner_id in ids:
            audit_board_update(
                release=releases[release_id],
                judge=judge,
                phase=phases[phase_id] if phase_id is not None else None,
                scanner_id=scanner_id,
            )
    return len(boards)


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
