"""Probe board rows (``ProbeBoardRow``): one per model and board, written when runs end.

A board is one suite at one suite version (the content hash a report was scored with), on
one phase of the suite or on the board without phase (``phase`` null). The null-phase board
holds every public entry of the suite; a phase board only that phase's entries. A hidden
phase's entries are left off the null-phase board until the phase is revealed (otherwise its
scores would show there), and stay on the phase's own board, which the selector shows to
staff and, row by row, to their owners.

Each model's entry is its chosen submission's latest report on that board, or, when it chose
none (or its choice has no report on this board), its latest report, as before choices
existed. Rows are derived from appended reports: a refresh deletes and rewrites a board's
rows in one transaction, so a reader sees the old board or the new one, never a mix.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models.fields.json import KT

from benchmarks_app.models import (
    EvaluationRun,
    Phase,
    ProbeRunReport,
    ProbeSuite,
    ResponseSubmission,
    RunStatus,
)
from benchmarks_app.models.boards import ProbeBoardRow, probe_board_sort_fields
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, key_of, ties_all
from benchmarks_app.selectors.visibility import in_unrevealed_phase
from benchmarks_app.services.board_ties import board_row_delete, board_row_save
from scoring.probes.metrics import RANKING_METRIC


class _Every(enum.Enum):
    PHASE = "every phase"


#: ``probe_board_refresh(phase=EVERY_PHASE)``: the null-phase board and every phase's board.
EVERY_PHASE = _Every.PHASE


def report_version(report: ProbeRunReport) -> str:
    """The suite version a report was scored with; "" (the legacy board) before versions."""
    return str((report.metrics or {}).get("suite_version") or "")


def _ci_bounds(ci: dict[str, Any] | None) -> tuple[float | None, float | None]:
    ci = ci or {}
    if ci.get("metric") != RANKING_METRIC:
        return None, None
    return ci.get("low"), ci.get("high")


def _sort_key(report: ProbeRunReport) -> tuple[Any, ...]:
    # As the board has always been ranked: resilience (missing last), pass rate, model name.
    return (
        report.resilience_index is None,
        -(report.resilience_index or 0.0),
        -(report.pass_rate or 0.0),
        report.submission.model_name,
    )


def _board_reports(
    suite: ProbeSuite, phase: Phase | None, model_name: str | None = None
) -> list[ProbeRunReport]:
    """Every succeeded report that may count on ``suite``'s board of ``phase``, newest first
    (of one model with ``model_name``)."""
    qs = ProbeRunReport.objects.filter(
        submission__suite=suite, run__status=RunStatus.SUCCEEDED
    ).select_related("submission", "submission__phase")
    if model_name is not None:
        # The model's submissions by id (a handful): filtered by a join, SQLite walked every
        # report of the suite newest first (60 ms at 100,000 models).
        ids = ResponseSubmission.objects.filter(suite=suite, model_name=model_name)
        qs = qs.filter(submission_id__in=list(ids.values_list("pk", flat=True)))
    if phase is not None:
        qs = qs.filter(submission__phase=phase)
    else:
        # A hidden phase's entries reach the board of all entries once the phase is revealed.
        qs = qs.exclude(in_unrevealed_phase("submission__phase"))
    # Only what a row needs: the report's metrics hold every case summary and can be large,
    # so the two keys read from them are read by key.
    qs = qs.defer("metrics", "observability").annotate(
        version=KT("metrics__suite_version"), evaluated=KT("metrics__counts__evaluated")
    )
    if model_name is not None:
        # One model's few reports, sorted here: an ORDER BY made SQLite walk the reports'
        # time index instead of looking them up by submission.
        found = list(qs.order_by())
        return sorted(found, key=lambda r: (r.created_at, r.pk), reverse=True)
    return list(qs.order_by("-created_at", "-id"))


def _entries(reports: Iterable[ProbeRunReport]) -> dict[tuple[str, str], ProbeRunReport]:
    """Per (suite version, model): the chosen submission's latest report, else the latest."""
    latest: dict[tuple[str, str], ProbeRunReport] = {}
    chosen: dict[tuple[str, str], ProbeRunReport] = {}
    for report in reports:  # newest first
        key = (report.version or "", report.submission.model_name)  # type: ignore[attr-defined]
        latest.setdefault(key, report)
        if report.submission.board_choice:
            chosen.setdefault(key, report)
    return {key: chosen.get(key, report) for key, report in latest.items()}


def _rows(
    suite: ProbeSuite, version: str, phase: Phase | None, reports: list[ProbeRunReport]
) -> list[ProbeBoardRow]:
    """The board rows of ``reports`` (one per model), in the board's order, their ties set."""
    reports = sorted(reports, key=_sort_key)
    rows = []
    for report in reports:
        low, high = _ci_bounds(report.ci)
        submission = report.submission
        evaluated = report.evaluated  # type: ignore[attr-defined]
        agreement = report.agreement or {}
        rows.append(
            ProbeBoardRow(
                suite=suite,
                suite_version=version,
                phase=phase,
                model_name=submission.model_name,
                owner_id=submission.owner_id,
                submission=submission,
                run_id=report.run_id,
                report=report,
                ci_low=low,
                ci_high=high,
                is_baseline=submission.is_baseline,
                method_name=submission.method_name,
                method_description=submission.method_description,
                method_url=submission.method_url,
                resilience_index=report.resilience_index,
                pass_rate=report.pass_rate,
                severity_weighted_pass_rate=report.severity_weighted_pass_rate,
                high_stakes_failure_rate=report.high_stakes_failure_rate,
                agreement_accuracy=agreement.get("accuracy"),
                agreement_kappa=agreement.get("kappa"),
                evaluated=int(evaluated) if evaluated not in (None, "") else None,
                scored_at=report.created_at,
                **probe_board_sort_fields(
                    model_name=submission.model_name,
                    resilience_index=report.resilience_index,
                    pass_rate=report.pass_rate,
                    ci_low=low,
                    ci_high=high,
                ),
            )
        )
    ties_all(PROBE_SHAPE, rows)
    return rows


def _phases(suite: ProbeSuite, phase: Phase | _Every | None) -> list[Phase | None]:
    if phase is EVERY_PHASE:
        return [None, *Phase.objects.filter(suite=suite).order_by("starts_at", "pk")]
    return [phase]


@transaction.atomic
def probe_board_refresh(
    *,
    suite: ProbeSuite,
    suite_version: str | None = None,
    phase: Phase | _Every | None = EVERY_PHASE,
) -> int:
    """Rewrite the rows of ``suite``'s boards; the number of rows written.

    ``suite_version`` None: every version of the suite (each its own board); ``phase`` a
    phase, None (the board of all entries) or :data:`EVERY_PHASE` (both kinds).
    """
    written = 0
    for board_phase in _phases(suite, phase):
        reports = _board_reports(suite, board_phase)
        if suite_version is not None:
            reports = [r for r in reports if (r.version or "") == suite_version]  # type: ignore[attr-defined]
        by_version: dict[str, list[ProbeRunReport]] = {}
        for (version, _model), report in _entries(reports).items():
            by_version.setdefault(version, []).append(report)
        stale = ProbeBoardRow.objects.on_phase(board_phase).filter(suite=suite)
        if suite_version is not None:
            stale = stale.filter(suite_version=suite_version)
        stale.delete()
        rows: list[ProbeBoardRow] = []
        for version, entries in by_version.items():
            rows.extend(_rows(suite, version, board_phase, entries))
        ProbeBoardRow.objects.bulk_create(rows, batch_size=500)
        written += len(rows)
    return written


@transaction.atomic
def probe_board_update(
    *, suite: ProbeSuite, suite_version: str, phase: Phase | None, model_name: str
) -> int:
    """Bring one model's row of a board up to date with its reports (what a run's end
    changes), and the ties next to where it was and is now; the number of rows written.

    Places, ranks and rank ranges are counted when the board is read
    (:mod:`benchmarks_app.selectors.board_marks`). Gives what :func:`probe_board_refresh` of
    that board gives (a property test compares them). The suite row is locked meanwhile, so
    two runs ending at once update the board one after the other.
    """
    ProbeSuite.objects.select_for_update(no_key=True).filter(pk=suite.pk).first()
    reports = [
        r
        for r in _board_reports(suite, phase, model_name)
        if (r.version or "") == suite_version  # type: ignore[attr-defined]
    ]
    entry = _entries(reports).get((suite_version, model_name))
    board = ProbeBoardRow.objects.on_phase(phase).filter(suite=suite, suite_version=suite_version)
    previous = board.filter(model_name=model_name).first()
    if entry is not None:
        (row,) = _rows(suite, suite_version, phase, [entry])
        row.pk = previous.pk if previous is not None else None
        old_key = key_of(PROBE_SHAPE, previous) if previous is not None else None
        return board_row_save(shape=PROBE_SHAPE, row=row, old_key=old_key)
    if previous is not None:
        return board_row_delete(shape=PROBE_SHAPE, row=previous)
    return 0


def probe_board_refresh_for_run(*, run: EvaluationRun) -> None:
    """Update the boards ``run`` counts on: its suite version's board of all entries and,
    when its submission belongs to a phase, that phase's board; only the model's row and the
    rows whose places or marks move are written. A run that left no report (failed,
    cancelled) changes no board."""
    report = ProbeRunReport.objects.filter(run=run).select_related("submission").first()
    if report is None:
        return
    submission = report.submission
    version = report_version(report)
    suite = ProbeSuite.objects.get(pk=submission.suite_id)
    phases: list[Phase | None] = [None]
    if submission.phase_id is not None:
        phases.append(submission.phase)
    for phase in phases:
        probe_board_update(
            suite=suite, suite_version=version, phase=phase, model_name=submission.model_name
        )


def probe_board_refresh_for_phase(*, phase: Phase) -> None:
    """After a phase is revealed, hidden again, or its dates change: its suite's boards."""
    if phase.suite_id is not None:
        probe_board_refresh(suite=ProbeSuite.objects.get(pk=phase.suite_id))


def probe_board_refresh_for_submission(*, submission: Any) -> None:
    """After an entry choice changes: the boards the model's entries count on."""
    probe_board_refresh(suite=submission.suite, phase=None)
    if submission.phase_id is not None:
        probe_board_refresh(suite=submission.suite, phase=submission.phase)
