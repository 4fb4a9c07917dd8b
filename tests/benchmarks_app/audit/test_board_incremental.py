"""Issue 25: a run's end updates its scanner's row (and at most two neighbours' ties), not
the whole board; places and ranks are counted when read.

Property: over random boards and random sequences of run ends (new scanners, better or worse
results, partial coverage, identical numbers), the incrementally updated board equals, field
by field, the board :func:`audit_board_refresh` rebuilds from every result, and the marks
read from it (counted on its indexes, or in memory) equal those of
:func:`scoring.audit.board.order_board` over its rows: the one definition of the board.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks_app.models import (
    AuditDataset,
    AuditRepoResult,
    Benchmark,
    EvaluationRun,
    Repo,
    RunStatus,
    Scanner,
)
from benchmarks_app.models.audit import DatasetRelease
from benchmarks_app.models.audit_board import METRIC_COLUMNS, AuditBoardRow, audit_metric_columns
from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, own_order
from benchmarks_app.services.audit import audit_release_create, audit_release_publish
from benchmarks_app.services.audit.boards import audit_board_refresh, audit_board_refresh_for_run
from scoring.audit.board import order_board
from tests.benchmarks_app.board_marks_check import read_marks

pytestmark = pytest.mark.django_db

# Everything stored on a row but its id and write time.
FIELDS = [
    f.attname for f in AuditBoardRow._meta.concrete_fields if f.attname not in ("id", "computed_at")
]
BOARD = ("release", "judge", "phase")


def make_release(repos: int) -> DatasetRelease:
    dataset = AuditDataset.objects.create(slug="incremental", name="Incremental")
    dataset.repos.add(
        *(
            Repo.objects.create(project_id=f"inc_{i}_2025_01", name=f"Repo {i}")
            for i in range(repos)
        )
    )
    return audit_release_publish(release=audit_release_create(dataset=dataset))


def run_end(
    release: DatasetRelease, scanner: Scanner, counts: list[tuple[int, int, int, int] | None]
) -> EvaluationRun:
    """A succeeded run of ``scanner`` with one complete result per repo given counts
    (truth, tp, partial, false positives); None: the repo is not evaluated."""
    run = EvaluationRun.objects.create(
        benchmark=Benchmark.AUDIT,
        status=RunStatus.SUCCEEDED,
        is_complete=True,
        scanner=scanner,
        release=release,
        judge="offline",
    )
    repos = list(release.repos.order_by("project_id"))
    for repo, count in zip(repos, counts, strict=False):
        if count is None:
            continue
        truth, tp, partial, fp = count
        tp, partial = min(tp, truth), min(partial, truth - min(tp, truth))
        scan = tp + partial + fp
        AuditRepoResult.objects.create(
            run=run,
            repo=repo,
            scanner=scanner,
            is_complete=True,
            metrics={
                "repo": repo.project_id,
                "truth": truth,
                "scan": scan,
                "qa": 0,
                "tp": tp,
                "partial": partial,
                "fp": fp,
                "fn": truth - tp - partial,
                "truth_severity_counts": {},
                "scan_severity_counts": {},
            },
        )
    return run


def snapshot(release: DatasetRelease) -> list[dict[str, Any]]:
    return list(
        AuditBoardRow.objects.filter(release=release, judge="offline", phase=None)
        .order_by(*own_order(AUDIT_SHAPE))
        .values(*FIELDS)
    )


def stamped(release: DatasetRelease) -> list[dict[str, Any]]:
    return list(
        AuditBoardRow.objects.filter(release=release, judge="offline", phase=None).values(
            "scanner_id", "computed_at", *FIELDS
        )
    )


def marks_match_the_definition(release: DatasetRelease) -> list[tuple[Any, ...]]:
    """The marks read from the stored board, checked against ``order_board`` over its rows;
    returns (scanner, place, rank, best, worst, tie) in board order."""
    rows = list(
        AuditBoardRow.objects.filter(release=release, judge="offline", phase=None).values(
            "pk",
            "scanner__name",
            "is_complete",
            "repos_evaluated",
            "f1_with_partial",
            "f1",
            "ci_low",
            "ci_high",
            "tied_with_above",
        )
    )
    read = read_marks(AUDIT_SHAPE, {"release": release.pk, "judge": "offline", "phase": None})
    # The sortable metric columns are the metrics document's numbers (null where missing).
    for row in AuditBoardRow.objects.filter(release=release, judge="offline", phase=None):
        stored = {key: getattr(row, key) for key in METRIC_COLUMNS}
        assert stored == audit_metric_columns(row.metrics)
        assert stored["tp"] == row.metrics["tp"] and stored["truth"] == row.metrics["truth"]
    definition = order_board(
        names=[r["scanner__name"] for r in rows],
        complete=[r["is_complete"] for r in rows],
        repos_evaluated=[r["repos_evaluated"] for r in rows],
        f1_with_partial=[r["f1_with_partial"] for r in rows],
        f1=[r["f1"] for r in rows],
        ci_low=[r["ci_low"] for r in rows],
        ci_high=[r["ci_high"] for r in rows],
    )
    out = []
    for place, i in enumerate(definition.order.tolist(), start=1):
        row, marks = rows[i], read[rows[i]["pk"]]
        ranked = bool(row["is_complete"])
        expected = (
            place,
            int(definition.rank[i]) if ranked else None,
            int(definition.rank_low[i]) if ranked else None,
            int(definition.rank_high[i]) if ranked else None,
            bool(definition.tied_with_above[i]),
        )
        got = (marks.position, marks.rank, marks.rank_low, marks.rank_high, row["tied_with_above"])
        assert got == expected, (row["scanner__name"], got, expected)
        out.append((row["scanner__name"], *got))
    return out


def full_rebuild(release: DatasetRelease) -> list[dict[str, Any]]:
    """The board as a full rebuild writes it, without keeping it."""
    with transaction.atomic():
        audit_board_refresh(release=release, judge="offline")
        rebuilt = snapshot(release)
        transaction.set_rollback(True)
    return rebuilt


# Few distinct small counts, so that identical numbers (shared ranks, equal intervals) and
# overlapping intervals are common.
counts = st.tuples(
    st.integers(0, 4), st.integers(0, 4), st.integers(0, 2), st.integers(0, 5)
) | st.just((3, 2, 0, 1))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    repos=st.integers(1, 3),
    steps=st.lists(
        st.tuples(
            st.integers(0, 7),  # which scanner's run ends
            st.lists(st.none() | counts, min_size=3, max_size=3),
            st.booleans(),  # covers every repo (else the drawn ones only)
        ),
        min_size=1,
        max_size=10,
    ),
)
def test_run_ends_give_the_board_a_full_rebuild_gives(
    repos: int, steps: list[tuple[int, list[Any], bool]]
) -> None:
    with transaction.atomic():
        release = make_release(repos)
        scanners = [Scanner.objects.create(name=f"s{i}") for i in range(8)]
        for who, drawn, everywhere in steps:
            if everywhere:
                drawn = [c if c is not None else (2, 1, 1, 1) for c in drawn]
            before = {r["scanner_id"]: r for r in stamped(release)}
            entrant = scanners[who].pk
            written = audit_board_refresh_for_run(run=run_end(release, scanners[who], drawn))
            after = snapshot(release)
            assert after == full_rebuild(release)
            marks_match_the_definition(release)
            # Written: the scanner's row and at most two other rows' ties, nothing else.
            moved = set()
            for row in stamped(release):
                if row["scanner_id"] == entrant:
                    continue
                old = before[row["scanner_id"]]
                changed = {f for f in FIELDS if old[f] != row[f]}
                assert changed <= {"tied_with_above"}
                moved |= {row["scanner_id"]} if changed else set()
            assert len(moved) <= 2
            present = entrant in {r["scanner_id"] for r in after}
            assert written == len(moved) + (1 if present or entrant in before else 0)
        transaction.set_rollback(True)


def test_a_run_end_writes_only_the_rows_that_change() -> None:
    release = make_release(2)
    scanners = [Scanner.objects.create(name=f"tool-{i}") for i in range(6)]
    for i, scanner in enumerate(scanners):
        audit_board_refresh_for_run(run=run_end(release, scanner, [(10, i, 0, 3), (10, i, 1, 2)]))
    before = snapshot(release)
    assert [r["scanner_id"] for r in before] == [s.pk for s in reversed(scanners)]
    # The worst scanner improves past one other: its row is written, and the ties next to
    # where it was and is now; no other row, though the places of rows change.
    with CaptureQueriesContext(connection) as queries:
        written = audit_board_refresh_for_run(
            run=run_end(release, scanners[0], [(10, 1, 1, 0), (10, 1, 1, 0)])
        )
    after = snapshot(release)
    assert after == full_rebuild(release)
    old = {r["scanner_id"]: r for r in before}
    changed = {r["scanner_id"] for r in after if r != old[r["scanner_id"]]}
    places = {name: place for name, place, *_ in marks_match_the_definition(release)}
    assert places["tool-0"] == 5 and places["tool-1"] == 6
    assert written == len(changed) <= 3 < len(after)
    # No row is deleted and rewritten.
    assert not [q for q in queries.captured_queries if q["sql"].upper().startswith("DELETE")]


def test_a_scanner_whose_results_are_gone_leaves_the_board() -> None:
    release = make_release(1)
    a, b = Scanner.objects.create(name="a"), Scanner.objects.create(name="b")
    audit_board_refresh_for_run(run=run_end(release, a, [(5, 5, 0, 0)]))
    run = run_end(release, b, [(5, 1, 0, 0)])
    audit_board_refresh_for_run(run=run)
    AuditRepoResult.objects.filter(run=run).update(is_complete=False)
    audit_board_refresh_for_run(run=run)
    assert [r["scanner_id"] for r in snapshot(release)] == [a.pk]
    assert snapshot(release) == full_rebuild(release)
