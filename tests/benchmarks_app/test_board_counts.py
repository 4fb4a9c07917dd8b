"""Issue 25: places counted on a board's indexes for rows scattered over it (a page sorted by
a column) equal their places in the board's order, whatever columns of the order key the
rows share. On PostgreSQL the rows before a key are counted as index ranges bounded on one
column each (its scans stop at a row-value upper bound only on the bound's first column),
grouped by how many leading columns two consecutive keys share: the rows below are made to
share none, some, and all but the last (the id) of them, on a board beside a phase's board
whose rows must not be counted."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from django.utils import timezone

from benchmarks_app.models import (
    Benchmark,
    EvaluationRun,
    ProbeRunReport,
    RunStatus,
)
from benchmarks_app.models.boards import ProbeBoardRow
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, board_marks, key_of
from tests.factories.phases import ChecklistPhaseFactory
from tests.factories.probes import ResponseSubmissionFactory

pytestmark = pytest.mark.django_db

VERSION = "v1"


def _rows(
    submission: Any, phase: Any = None, *, copies: int = 2, prefix: str = "m"
) -> list[ProbeBoardRow]:
    run = EvaluationRun.objects.create(
        benchmark=Benchmark.PROBES, status=RunStatus.SUCCEEDED, probe_submission=submission
    )
    report = ProbeRunReport.objects.create(run=run, submission=submission, resilience_index=0.5)
    rng = random.Random(3)
    rows = []
    # Every combination of two values per order column, each twice: keys that differ in
    # any one column, and pairs that differ only by id.
    for n, (group, a, b, name, _) in enumerate(
        itertools.product((0, 1), (-0.5, -0.25), (-1.0, -0.5), ("61", "62"), range(copies))
    ):
        value = rng.random()
        rows.append(
            ProbeBoardRow(
                suite=submission.suite,
                suite_version=VERSION,
                phase=phase,
                model_name=f"{prefix}{n:03d}",
                submission=submission,
                run=run,
                report=report,
                scored_at=timezone.now(),
                sort_group=group,
                sort_a=a,
                sort_b=b,
                sort_name=name,
                span_low=None if group else value - 0.1,
                span_high=None if group else value + 0.1,
                resilience_index=None if group else value,
            )
        )
    return ProbeBoardRow.objects.bulk_create(rows)


def test_places_of_scattered_rows_are_their_places_in_the_board_order() -> None:
    submission = ResponseSubmissionFactory.create()
    _rows(submission)
    # A phase's board of the same suite and version: its rows are another board's.
    _rows(submission, ChecklistPhaseFactory.create(), prefix="p")
    board = {"suite": submission.suite_id, "suite_version": VERSION, "phase": None}
    stored = list(ProbeBoardRow.objects.filter(phase__isnull=True))
    in_order = sorted(stored, key=lambda row: key_of(PROBE_SHAPE, row))
    expected = {row.pk: place for place, row in enumerate(in_order, start=1)}
    whole = board_marks(PROBE_SHAPE, board)
    assert {pk: marks.position for pk, marks in whole.items()} == expected

    rng = random.Random(7)
    pks = [row.pk for row in in_order]
    subsets = [pks[::2], pks[1::3], pks[::5], [pks[0], pks[-1]], pks[-4:]]
    subsets += [rng.sample(pks, k) for k in (3, 7, 12, 20)]
    for subset in subsets:
        counted = board_marks(PROBE_SHAPE, board, subset)
        assert counted == {pk: whole[pk] for pk in subset}


def test_a_phase_board_counts_its_own_rows_only() -> None:
    submission = ResponseSubmissionFactory.create()
    _rows(submission, copies=1)
    phase = ChecklistPhaseFactory.create()
    _rows(submission, phase, copies=1, prefix="p")
    board = {"suite": submission.suite_id, "suite_version": VERSION, "phase": phase.pk}
    in_order = sorted(
        ProbeBoardRow.objects.filter(phase=phase), key=lambda row: key_of(PROBE_SHAPE, row)
    )
    pks = [row.pk for row in in_order]
    counted = board_marks(PROBE_SHAPE, board, pks[1::2])
    assert {pk: marks.position for pk, marks in counted.items()} == {
        pk: place for place, pk in enumerate(pks, start=1) if pk in set(pks[1::2])
    }
    assert ProbeBoardRow.objects.on_phase(phase).count() == len(pks)
    assert ProbeBoardRow.objects.on_phase(None).count() == len(pks)
