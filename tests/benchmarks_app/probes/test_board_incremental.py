"""Issue 25: a probe run's end updates its model's row (and at most two neighbours' ties), and
the board equals, field by field, what a full rebuild (``probe_board_refresh``) writes; the
places and ranks read from it (counted, or in memory) equal ``board_ranks`` over its rows in
the board's order (resilience, missing last; pass rate; name)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks_app.models import (
    Benchmark,
    EvaluationRun,
    ProbeRunReport,
    ProbeSuite,
    ResponseSubmission,
    RunStatus,
)
from benchmarks_app.models.boards import ProbeBoardRow
from benchmarks_app.selectors.board_marks import PROBE_SHAPE, own_order
from benchmarks_app.services.probes.boards import probe_board_refresh, probe_board_refresh_for_run
from scoring.stats import board_ranks
from tests.benchmarks_app.board_marks_check import read_marks

pytestmark = pytest.mark.django_db

FIELDS = [
    f.attname
    for f in ProbeBoardRow._meta.concrete_fields
    if f.attname not in ("id", "computed_at", "scored_at")
]


def snapshot(suite: ProbeSuite) -> list[dict[str, Any]]:
    return list(
        ProbeBoardRow.objects.filter(suite=suite)
        .order_by("suite_version", *own_order(PROBE_SHAPE))
        .values(*FIELDS)
    )


def marks_match_the_definition(suite: ProbeSuite, version: str) -> None:
    rows = list(
        ProbeBoardRow.objects.filter(suite=suite, suite_version=version, phase=None).values(
            "pk", "model_name", "resilience_index", "pass_rate", "ci_low", "ci_high", "tied"
        )
    )
    rows.sort(
        key=lambda r: (
            r["resilience_index"] is None,
            -(r["resilience_index"] or 0.0),
            -(r["pass_rate"] or 0.0),
            r["model_name"],
        )
    )
    definition = board_ranks([(r["resilience_index"], r["ci_low"], r["ci_high"]) for r in rows])
    read = read_marks(PROBE_SHAPE, {"suite": suite.pk, "suite_version": version, "phase": None})
    for place, (row, mark) in enumerate(zip(rows, definition, strict=True), start=1):
        got = read[row["pk"]]
        ranked = row["resilience_index"] is not None
        assert (got.position, got.rank, got.rank_low, got.rank_high, row["tied"]) == (
            place,
            place if ranked else None,
            mark.rank_low,
            mark.rank_high,
            mark.tied,
        )


def full_rebuild(suite: ProbeSuite) -> list[dict[str, Any]]:
    with transaction.atomic():
        probe_board_refresh(suite=suite)
        rebuilt = snapshot(suite)
        transaction.set_rollback(True)
    return rebuilt


def run_end(
    submission: ResponseSubmission,
    version: str,
    value: float | None,
    passed: float,
    half: float | None,
) -> EvaluationRun:
    run = EvaluationRun.objects.create(
        benchmark=Benchmark.PROBES,
        status=RunStatus.SUCCEEDED,
        is_complete=True,
        probe_submission=submission,
    )
    ci = None
    if value is not None and half is not None:
        ci = {"metric": "resilience_index", "low": max(0.0, value - half), "high": value + half}
    ProbeRunReport.objects.create(
        run=run,
        submission=submission,
        metrics={"suite_version": version, "counts": {"evaluated": 4}},
        resilience_index=value,
        pass_rate=passed,
        ci=ci,
    )
    return run


# Few distinct values: equal indexes, equal intervals and overlaps are common.
values = st.none() | st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
halves = st.none() | st.sampled_from([0.0, 0.1, 0.3])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(0, 6),  # which model
            st.booleans(),  # a new submission of it (else its first)
            st.sampled_from(["v1", "v2"]),
            values,
            st.sampled_from([0.0, 0.5, 1.0]),
            halves,
        ),
        min_size=1,
        max_size=12,
    )
)
def test_run_ends_give_the_board_a_full_rebuild_gives(steps: list[tuple[Any, ...]]) -> None:
    with transaction.atomic():
        suite = ProbeSuite.objects.create(name="incremental")
        first: dict[int, ResponseSubmission] = {}
        for model, fresh, version, value, passed, half in steps:
            submission = first.get(model)
            if submission is None or fresh:
                submission = ResponseSubmission.objects.create(suite=suite, model_name=f"m{model}")
                first.setdefault(model, submission)
            before = {(r["suite_version"], r["model_name"]): r for r in snapshot(suite)}
            probe_board_refresh_for_run(run=run_end(submission, version, value, passed, half))
            after = snapshot(suite)
            assert after == full_rebuild(suite)
            for board_version in ("v1", "v2"):
                marks_match_the_definition(suite, board_version)
            # Rows of the other version's board are never touched; on this board, the
            # model's row and at most two others' ties.
            touched = []
            for row in after:
                old = before.get((row["suite_version"], row["model_name"]))
                if row["suite_version"] != version:
                    assert old == row
                elif row["model_name"] != submission.model_name and old != row:
                    assert old is not None and {f for f in FIELDS if old[f] != row[f]} == {"tied"}
                    touched.append(row["model_name"])
            assert len(touched) <= 2
        transaction.set_rollback(True)
