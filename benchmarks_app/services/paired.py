"""The paired marks of a board (rank range and "tied with the row above" by the paired rule of
:mod:`scoring.stats.paired`), computed apart from a run's end.

A run's end asks for its boards' paired marks (:func:`paired_refresh_request`): one
``PairedRefresh`` row per board, and a task enqueued when the transaction commits only if
no request was already waiting, so however many runs end on a board meanwhile, one refresh
runs (:func:`paired_refresh_take` deletes the request before reading the board; a change
after that asks again). Until it has run, pages show the unpaired marks with a note.

Bounded work: the paired rule tests the first :data:`PAIRED_MAX_ROWS` ranked rows of a board
(the rows whose places people read and cite), each against the rows whose unpaired
intervals overlap it within :data:`~scoring.stats.paired.PAIRED_WINDOW` places; the rows
below keep their unpaired marks (paired columns null). Rows are tested only when they were
scored on the same items as most of those rows.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from benchmarks_app.db_retry import retry_on_conflict
from benchmarks_app.models import (
    Benchmark,
    Challenge,
    DatasetRelease,
    EvaluationRun,
    PairedBoardSummary,
    PairedRefresh,
    ProbeSuite,
)
from benchmarks_app.selectors.audit_board_results import board_judge_key
from benchmarks_app.selectors.board_marks import own_order
from benchmarks_app.selectors.paired import (
    SHAPES,
    SPECS,
    BoardKey,
    board_items,
    board_key_of_row,
    board_queryset,
    ranked_rows,
)
from scoring.stats import DEFAULT_LEVEL, DEFAULT_RESAMPLES
from scoring.stats.bootstrap import widen_spans
from scoring.stats.paired import (
    PAIRED_SEED,
    PAIRED_WINDOW,
    paired_distributions,
    paired_marks,
)

logger = logging.getLogger(__name__)

PAIRED_MAX_ROWS = 2_000
TASK = "benchmarks_app.tasks.paired.refresh_paired_marks"


@dataclass(frozen=True)
class PairedResult:
    board: str
    ranked: int
    marked: int
    tested_pairs: int
    split_pairs: int
    ties_unpaired: int
    ties_paired: int


# A request still waiting this long after its task was queued lost the task: send it again.
PAIRED_RESEND_AFTER_S = 600.0
# The commit hook of a new request sends it within moments; the sweeper leaves it that long.
PAIRED_SEND_GRACE_S = 10.0


def _enqueue(board: str) -> bool:
    """Queue ``board``'s refresh and note when; a broker that refuses it (Redis down) leaves
    the request owed for the sweeper, never fails the caller (a run's end). True when sent."""
    from django_q.tasks import async_task

    try:
        async_task(TASK, board, task_name=f"paired {board}"[:100])
    except Exception as exc:
        logger.warning(
            "could not queue the paired marks of %s (%s: %s); the sweeper sends them later",
            board,
            type(exc).__name__,
            exc,
        )
        return False
    PairedRefresh.objects.filter(board=board).update(enqueued_at=timezone.now())
    return True


def paired_owed_send() -> int:
    """Queue the paired refreshes whose task never reached the queue (or was lost there);
    the number sent. A second task for a board is harmless: the first to run takes it."""
    now = timezone.now()
    owed = PairedRefresh.objects.filter(
        Q(enqueued_at__isnull=True, requested_at__lt=now - timedelta(seconds=PAIRED_SEND_GRACE_S))
        | Q(enqueued_at__lt=now - timedelta(seconds=PAIRED_RESEND_AFTER_S))
    )
    return sum(_enqueue(board) for board in owed.values_list("board", flat=True))


@transaction.atomic
def paired_refresh_request(*, board: BoardKey) -> bool:
    """Ask for the paired marks of ``board``; True when a task was enqueued (none waiting)."""
    _, created = PairedRefresh.objects.get_or_create(board=str(board))
    if created:
        name = str(board)
        transaction.on_commit(lambda: _enqueue(name))
    return created


def paired_refresh_for_run(*, run: EvaluationRun) -> int:
    """Ask for the paired marks of every board ``run``'s entry is on; the number asked for."""
    keys: set[BoardKey] = set()
    if run.benchmark == Benchmark.AUDIT:
        if run.release_id is not None:
            judge = board_judge_key(run)
            keys = {
                BoardKey("audit", run.release_id, phase, judge) for phase in {None, run.phase_id}
            }
    else:
        kinds: dict[str, str] = {Benchmark.PROBES: "probes", Benchmark.CHECKLIST: "checklist"}
        kind = kinds.get(run.benchmark)
        if kind is not None:
            rows = SPECS[kind].model.objects.filter(run=run)  # type: ignore[attr-defined]
            keys = {board_key_of_row(kind, row) for row in rows}
    return sum(paired_refresh_request(board=key) for key in sorted(keys, key=str))


def paired_refresh_take(*, board: str) -> bool:
    """Take ``board``'s waiting request (True), or learn another worker took it (False)."""
    deleted, _ = PairedRefresh.objects.filter(board=board).delete()
    return bool(deleted)


def _spans(rows: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    values = np.asarray([r.value for r in rows], dtype=np.float64)
    lows = np.asarray(
        [r.value if r.ci_low is None or r.exact else r.ci_low for r in rows], dtype=np.float64
    )
    highs = np.asarray(
        [r.value if r.ci_high is None or r.exact else r.ci_high for r in rows], dtype=np.float64
    )
    lows, highs = widen_spans(values, lows, highs)
    exact = np.asarray([r.exact for r in rows], dtype=np.bool_)
    return values, lows, highs, exact


def _lock_board_scope(board: BoardKey) -> None:
    """Take the row lock every writer of ``board`` takes first: its release, suite or
    challenge (``services.audit.boards``, ``services.probes.boards``,
    ``services.checklist.boards``)."""
    scopes: dict[str, Any] = {
        "audit": DatasetRelease,
        "probes": ProbeSuite,
        "checklist": Challenge,
    }
    scopes[board.kind].objects.select_for_update(no_key=True).filter(pk=board.scope).first()


def _fingerprint(board: BoardKey) -> dict[str, Any]:
    """What changes whenever a board's rows do: their number and latest write (a run's end
    saves its entrant's row, which writes ``computed_at``; paired marks do not touch it)."""
    rows = board_queryset(board)
    return {"rows": rows.count(), "latest": rows.aggregate(at=Max("computed_at"))["at"]}


@retry_on_conflict
def board_paired_refresh(
    *,
    board: BoardKey,
    max_rows: int = PAIRED_MAX_ROWS,
    window: int = PAIRED_WINDOW,
    resamples: int = DEFAULT_RESAMPLES,
) -> PairedResult:
    """Compute and store the paired marks of ``board`` (every board kind).

    Should the board change while they are computed (a run ended meanwhile), nothing is
    written and the board is asked for again, so marks never describe an older board."""
    seen = _fingerprint(board)
    rows = ranked_rows(board)
    spec = SPECS[board.kind]
    head = rows[:max_rows]
    items = board_items(board.kind, [r.pk for r in head])
    common = Counter(keys for keys, _ in items.values()).most_common(1)
    keyset = common[0][0] if common else None
    tested = np.zeros(len(rows), dtype=np.bool_)
    entries: list[Any] = []
    for i, row in enumerate(head):
        found = items.get(row.pk)
        if found is not None and found[0] == keyset and len(keyset or ()) > 0:
            tested[i] = True
            entries.append(found[1])
    _, draws = paired_distributions(entries, resamples=resamples, seed=PAIRED_SEED)
    values, lows, highs, exact = _spans(rows)
    marks = paired_marks(
        draws,
        values=values,
        lows=lows,
        highs=highs,
        exact=exact,
        tested=tested,
        items=len(keyset or ()),
        level=DEFAULT_LEVEL,
        window=window,
        # The per-item rows, for the exact test that keeps a handful of items from splitting
        # a pair (scoring.stats.paired.exact_p_value).
        matrices=[entry.matrix for entry in entries],
    )
    model = spec.model
    beyond = ~Q(pk__in=[row.pk for row in head])
    with transaction.atomic():
        # The board's writers (a run's end, an upload's refresh) lock its scope row before
        # they touch its rows; so do these marks, or the bulk update and a whole-board
        # rewrite lock the same rows in opposite orders and PostgreSQL aborts one of them
        # (seen under the deadline rush). Locked, the fingerprint check is exact too.
        _lock_board_scope(board)
        if _fingerprint(board) != seen:
            paired_refresh_request(board=board)
            return PairedResult(str(board), len(rows), 0, marks.tested_pairs, 0, 0, 0)
        updates = [
            model(
                pk=row.pk,
                paired_rank_low=int(marks.rank_low[i]),
                paired_rank_high=int(marks.rank_high[i]),
                paired_tied=bool(marks.tied_with_above[i]),
            )
            for i, row in enumerate(head)
        ]
        model.objects.bulk_update(  # type: ignore[attr-defined]
            updates, ["paired_rank_low", "paired_rank_high", "paired_tied"], batch_size=500
        )
        board_queryset(board).filter(beyond).exclude(
            paired_rank_low__isnull=True, paired_tied__isnull=True
        ).update(paired_rank_low=None, paired_rank_high=None, paired_tied=None)
        PairedBoardSummary.objects.update_or_create(
            board=str(board),
            defaults={
                "ranked": len(rows),
                "marked": len(head),
                "tested_pairs": marks.tested_pairs,
                "split_pairs": marks.split_pairs,
                "correction": marks.correction,
                "exact_test": marks.exact_test,
            },
        )
    unpaired_ties = board_queryset(board).filter(spec.ranked, **{spec.tie: True}).count()
    return PairedResult(
        board=str(board),
        ranked=len(rows),
        marked=len(head),
        tested_pairs=marks.tested_pairs,
        split_pairs=marks.split_pairs,
        ties_unpaired=unpaired_ties,
        ties_paired=int(marks.tied_with_above[: len(head)].sum())
        + board_queryset(board).filter(spec.ranked, beyond, **{spec.tie: True}).count(),
    )


_KEY_FIELDS = {
    "audit": ("release_id", "phase_id", "judge"),
    "probes": ("suite_id", "phase_id", "suite_version"),
    "checklist": ("challenge_id", "phase_id"),
}


def _board_keys(kind: str, rows: QuerySet[Any]) -> set[BoardKey]:
    fields = _KEY_FIELDS[kind]
    return {
        BoardKey(kind, values[0], values[1], values[2] if len(values) > 2 else "")
        for values in rows.order_by().values_list(*fields).distinct()
    }


def paired_refresh_all() -> list[PairedResult]:
    """The paired marks of every board that has rows, now (the bench; after a rebuild)."""
    keys: set[BoardKey] = set()
    for kind, spec in SPECS.items():
        keys |= _board_keys(kind, spec.model.objects.all())  # type: ignore[attr-defined]
    return [board_paired_refresh(board=k) for k in sorted(keys, key=str)]


def paired_sweep() -> int:
    """Ask for the paired marks of every board with a ranked row among the first
    :data:`PAIRED_MAX_ROWS` that has none (a board rewritten whole: a phase revealed, an entry
    chosen, ``rebuild_boards``); the number of boards asked for. The run sweeper calls it
    every minute, so no board stays without paired marks for long; it also sends the
    requests whose task the broker refused (:func:`paired_owed_send`)."""
    asked = paired_owed_send()
    for kind, spec in SPECS.items():
        rows = spec.model.objects.filter(  # type: ignore[attr-defined]
            spec.ranked, paired_rank_low__isnull=True
        )
        for key in sorted(_board_keys(kind, rows), key=str):
            # Rows beyond the first PAIRED_MAX_ROWS never get paired marks.
            head = (
                board_queryset(key)
                .filter(spec.ranked)
                .order_by(*own_order(SHAPES[kind]))
                .values_list("paired_rank_low", flat=True)[:PAIRED_MAX_ROWS]
            )
            if None in head:
                asked += paired_refresh_request(board=key)
    return asked
