"""One claimed piece of a run processed under its lease, and how its attempt ends.

The piece's benchmark work runs under a renewed lease (:class:`.leases.LeaseKeeper`) and a
tracing span; the attempt then ends one way of several: done (and the run ended if it was the
last piece), paused on a down judge, parked for want of storage or re-queued after a lost
database (:mod:`.run_recovery`), stopped by a cancel, or failed with the run. The caller
(:mod:`.scheduling`) claims pieces and drives them side by side; this module knows one piece.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone
from django.utils.module_loading import import_string

from benchmarks_app.db_pool import connection_release
from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES, PIECE_CANCELLED_ERROR
from benchmarks_app.services.leases import (
    LeaseKeeper,
    LeaseLost,
    RunCancelled,
    holding,
    lease_holder,
    piece_end,
)
from benchmarks_app.services.run_recovery import (
    database_lost,
    piece_park,
    piece_park_after_write_failure,
    piece_park_beside_sibling,
    piece_requeue_after_database_loss,
    write_failure,
)
from benchmarks_app.services.run_state import RUN_KINDS, run_fail, run_finish_if_last, run_start
from scoring.judges import tracing
from scoring.judges.failures import JudgeUnavailable
from scoring.judges.outage import outages_reported_to

logger = logging.getLogger(__name__)


def piece_run(piece: RunPiece) -> None:
    """Process a claimed piece under a renewed lease, and end the run if it was the last.

    A judge that stays down past its patience pauses the piece (and the run, "waiting for
    judge") for the sweeper to hand out again, and so does a write refused for want of space
    ("waiting for storage"); a lease taken over drops this worker's writes;
    a cancelled run stops the piece (calls in flight abandoned, what was judged kept); any
    other error fails the run with its message (a resume redoes what is missing).
    """
    run = piece.run
    if piece_park_beside_sibling(piece=piece):
        return
    if not run_start(run.pk):
        run.refresh_from_db()
        why = PIECE_CANCELLED_ERROR if run.status == RunStatus.CANCELLED else f"run is {run.status}"
        piece_end(piece=piece, status=PieceStatus.FAILED, error=why)
        return
    if piece.attempt > 1:
        _mark_lost_calls(piece)
    run.refresh_from_db()
    kind = RUN_KINDS[run.benchmark]
    keeper = LeaseKeeper(piece)
    keeper.start()
    # Whether this piece ended the run: then it exports the run's span (when tracing is on).
    ended_run = False
    try:
        with (
            tracing.piece_span(
                run_id=run.pk,
                token=_trace_token(run),
                piece=piece.key,
                attributes={"run.benchmark": run.benchmark, "piece.attempt": piece.attempt},
            ),
            holding(piece, cancelled=keeper.cancelled),
            # The keeper writes the outage its calls meet onto the piece: the run's page says
            # why it waits while the worker rides it out (JUDGE_OUTAGE_PATIENCE_S).
            outages_reported_to(keeper.judge_outage_seen),
        ):
            # Pooled: what the claim took goes back; each trip of the piece takes one again.
            connection_release()
            if kind.plan:
                import_string(kind.process)(run, piece.key)
            else:
                import_string(kind.process)(run)
            keeper.stop()
            if keeper.lost.is_set():
                raise LeaseLost(f"piece {piece.pk}: lease lost while processing")
            if piece_end(piece=piece, status=PieceStatus.DONE):
                ended_run = run_finish_if_last(run.pk, kind)
    except LeaseLost as exc:
        logger.warning("run #%s: %s; the new holder carries on", run.pk, exc)
    except RunCancelled:
        _stop_cancelled(piece)
    except JudgeUnavailable as exc:
        _pause(piece, str(exc), outage=_outage_at_pause(keeper, exc))
    except Exception as exc:
        if (cause := write_failure(exc)) is not None:
            # A full disk is not the run's fault nor the database's loss: park it, with why.
            piece_park_after_write_failure(piece=piece, cause=cause)
            return
        if database_lost(exc):
            # A restart or fail-over of the database is transient: nothing failed.
            piece_requeue_after_database_loss(piece=piece, error=exc)
            return
        if EvaluationRun.objects.filter(
            pk=run.pk, status__in=[RunStatus.CANCELLED, RunStatus.FAILED]
        ).exists():
            # An error on the way out of a cancelled run, or of one a sibling piece failed
            # meanwhile (a write refused, a call cut short): the run already says why.
            _stop_cancelled(piece)
            return
        message = f"{type(exc).__name__}: {exc}"
        logger.error("run #%s failed (piece %r): %s", run.pk, piece.key or "all", message)
        with holding(piece):
            try:
                run_fail(run_id=run.pk, error=message)
            except LeaseLost:
                return
        ended_run = True
        piece_end(piece=piece, status=PieceStatus.FAILED, error=message)
        raise
    finally:
        keeper.stop()
        if ended_run:
            _trace_run_end(run.pk)


def _trace_token(run: EvaluationRun) -> str:
    # With the run's id, what its trace id is derived from (scoring.judges.tracing.run_ids).
    return run.created_at.isoformat()


def _trace_run_end(run_id: int) -> None:
    """Export the ended run's span, the parent of its pieces' spans (tracing on only)."""
    if not tracing.enabled():
        return
    try:
        run = EvaluationRun.objects.get(pk=run_id)
        tracing.export_run(
            run_id=run.pk,
            token=_trace_token(run),
            started=run.started_at,
            ended=run.finished_at or timezone.now(),
            attributes={
                "run.benchmark": run.benchmark,
                "run.judge": run.judge,
                "run.status": run.status,
                "run.failed_items": run.failed_items,
            },
        )
        tracing.flush()
    except Exception:
        # Tracing is for operators: it never fails the run, nor hides the piece's own error.
        logger.warning("run #%s: its trace span could not be exported", run_id, exc_info=True)


def _stop_cancelled(piece: RunPiece) -> None:
    """The run was cancelled, or failed by a sibling piece: this piece's calls still in flight
    are abandoned, it ends."""
    from benchmarks_app.services.judging import judge_calls_abandon

    status = EvaluationRun.objects.filter(pk=piece.run_id).values_list("status", flat=True).first()
    why = "run failed" if status == RunStatus.FAILED else PIECE_CANCELLED_ERROR
    abandoned = judge_calls_abandon(holder=lease_holder(piece))
    piece_end(piece=piece, status=PieceStatus.FAILED, error=why)
    logger.info(
        "run #%s piece %r stopped: %s (%s call(s) abandoned in flight)",
        piece.run_id,
        piece.key or "all",
        why,
        abandoned,
    )


def _mark_lost_calls(piece: RunPiece) -> None:
    """Judge calls a dead holder of this piece left in flight are recorded as lost."""
    from benchmarks_app.models import JudgeInFlight
    from benchmarks_app.services.judging import judge_calls_mark_lost

    for attempt in range(1, piece.attempt):
        holder = lease_holder(RunPiece(pk=piece.pk, attempt=attempt))
        judge_calls_mark_lost(holder=holder)
        # Its questions are nobody's now: let the new holder ask them instead of waiting for
        # the dead asker's in-flight rows to expire.
        JudgeInFlight.objects.filter(holder__startswith=f"{holder}#").delete()


def _outage_at_pause(keeper: LeaseKeeper, exc: JudgeUnavailable) -> dict[str, object]:
    """What the parked piece keeps of the outage: when it began (as its calls saw it, else
    ``waited_s`` before now) and why; the next try is the piece's ``retry_at``."""
    record = {**keeper.judge_outage_record()}
    if not record.get("since"):
        record["since"] = (timezone.now() - timedelta(seconds=exc.waited_s)).isoformat()
    record.update(next_try=None, gives_up_at=None, error=str(record.get("error") or exc.reason))
    return record


def _pause(piece: RunPiece, reason: str, *, outage: dict[str, object] | None = None) -> None:
    if not piece_end(piece=piece, status=PieceStatus.WAITING, error=reason):
        return
    piece_park(piece=piece)
    if outage:
        RunPiece.objects.filter(pk=piece.pk, status=PieceStatus.WAITING).update(judge_outage=outage)
    EvaluationRun.objects.filter(pk=piece.run_id, status__in=ACTIVE_STATUSES).update(
        status=RunStatus.WAITING,
        error=f"Waiting for the judge: {reason}"[:10000],
        updated_at=timezone.now(),
    )
    logger.warning(
        "run #%s paused, waiting for the judge (piece %r): %s",
        piece.run_id,
        piece.key or "all",
        reason,
    )
