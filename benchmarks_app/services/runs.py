"""The evaluation-run life cycle shared by all three benchmarks.

A run is split into pieces (:class:`~benchmarks_app.models.RunPiece`): one per repo for the
audit benchmark, one for the whole run otherwise. Each piece is one queue task, held under a
lease (:mod:`benchmarks_app.services.leases`), so no task comes near ``Q_TIMEOUT``, a crash
redoes one piece at most, and one big run spreads over every free worker. The run ends when
its last piece does. A piece whose worker died, whose task was lost, or that paused while the
judge was down, is handed out again by the sweeper (:mod:`benchmarks_app.services.sweeper`),
with no person acting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.module_loading import import_string

from benchmarks_app.models import (
    Benchmark,
    EvaluationRun,
    PieceStatus,
    RunPiece,
    RunStatus,
)
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.runs import (
    FINGERPRINT_KEY,
    describe_failed_items,
    permanent_text,
    run_failed_items,
    run_failure_causes,
    run_judge_fingerprint,
    run_resume_blocker,
    stored_judge_config,
)
from benchmarks_app.services.leases import (
    LeaseKeeper,
    LeaseLost,
    holding,
    lease_fence,
    lease_holder,
    piece_claim,
    piece_end,
)
from benchmarks_app.services.queue_canary import queue_canary_write
from benchmarks_app.services.run_events import run_ended
from benchmarks_app.services.run_recovery import (
    database_lost,
    piece_park,
    piece_park_beside_sibling,
    piece_requeue_after_database_loss,
)
from scoring.judges.failures import FailureCause, JudgeUnavailable, headline

logger = logging.getLogger(__name__)

# The queue task that processes one piece of a run.
PIECE_TASK = "benchmarks_app.tasks.runs.process_run_piece"


@dataclass(frozen=True)
class RunKind:
    """How a benchmark's runs are cut and processed (dotted paths: services import this module).

    ``plan(run)`` lists the keys of the pieces still to do; ``process(run, key)`` does one and
    must skip items that already have results, so that a piece done again redoes only what is
    missing; ``finish(run)``, when given, ends the run once every piece has ended (otherwise
    ``process`` ends it, as single-piece runs do).
    """

    process: str
    plan: str | None = None
    finish: str | None = None


RUN_KINDS: dict[str, RunKind] = {
    Benchmark.AUDIT: RunKind(
        plan="benchmarks_app.services.audit.processing.audit_run_plan",
        process="benchmarks_app.services.audit.processing.audit_process_piece",
        finish="benchmarks_app.services.audit.processing.audit_run_finish",
    ),
    Benchmark.PROBES: RunKind(process="benchmarks_app.services.probes.probe_run_process"),
    Benchmark.CHECKLIST: RunKind(process="benchmarks_app.services.checklist.process_checklist"),
}


class RunNotResumable(Exception):
    pass


def run_plan(run: EvaluationRun) -> list[str]:
    kind = RUN_KINDS[run.benchmark]
    return list(import_string(kind.plan)(run)) if kind.plan else [""]


def piece_send(*, piece: RunPiece) -> None:
    """Give one piece to the queue and note when (the sweeper resends lost ones)."""
    from django_q.tasks import async_task

    label = f"{piece.run.benchmark}-run-{piece.run_id}" + (f"-{piece.key}" if piece.key else "")
    queue_canary_write()  # so that a cluster with another SECRET_KEY can tell
    RunPiece.objects.filter(pk=piece.pk).update(enqueued_at=timezone.now())
    task_id = async_task(PIECE_TASK, piece.pk, task_name=label[:100])
    # In sync mode the task has already run; keep the id for the admin and the sweeper.
    RunPiece.objects.filter(pk=piece.pk).update(task_id=str(task_id or "")[:64])
    EvaluationRun.objects.filter(pk=piece.run_id).update(task_id=str(task_id or "")[:64])


def run_pieces_prepare(*, run: EvaluationRun) -> list[RunPiece]:
    """The run's pieces still to do, each ``queued`` (created on the first call).

    On a resumed run what ended (or paused) is queued again; a piece somebody holds under a
    live lease is left to them.
    """
    pieces = []
    for key in run_plan(run) or [""]:
        piece, created = RunPiece.objects.get_or_create(run=run, key=key)
        if not created:
            RunPiece.objects.filter(pk=piece.pk).exclude(
                status=PieceStatus.RUNNING, lease_expires_at__gte=timezone.now()
            ).update(status=PieceStatus.QUEUED, error="", finished_at=None)
            piece.refresh_from_db()
        if piece.status == PieceStatus.QUEUED:
            pieces.append(piece)
    return pieces


def run_enqueue(*, run: EvaluationRun) -> None:
    """Cut the run into pieces and hand them to django-q2 once the transaction has committed."""
    run_id = run.pk

    def _send() -> None:
        for piece in run_pieces_prepare(run=EvaluationRun.objects.get(pk=run_id)):
            piece_send(piece=piece)

    transaction.on_commit(_send)


def run_process_all(*, run_id: int) -> None:
    """Process a whole run in this process (tasks queued before runs were cut into pieces)."""
    run = EvaluationRun.objects.get(pk=run_id)
    if run.status in ACTIVE_STATUSES:
        run_pieces_prepare(run=run)
        run_process_here(run=run, raise_errors=True)


@transaction.atomic
def run_create(
    *,
    benchmark: str,
    judge: str,
    judge_config: dict[str, Any] | None = None,
    created_by: Any = None,
    enqueue: bool = True,
    **targets: Any,
) -> EvaluationRun:
    """Create a queued run (``targets``: scanner, probe_submission, checklist_submission)."""
    repos = targets.pop("repos", None)
    run = EvaluationRun.objects.create(
        benchmark=benchmark,
        judge=judge,
        judge_config=judge_config or {},
        created_by=created_by if getattr(created_by, "is_authenticated", False) else None,
        **targets,
    )
    if repos is not None:
        run.repos.set(repos)
    if enqueue:
        run_enqueue(run=run)
    return run


def run_start(run_id: int) -> bool:
    """``queued``/``waiting`` → ``running`` (the first piece to start does it); False if ended."""
    now = timezone.now()
    EvaluationRun.objects.filter(
        pk=run_id, status__in=[RunStatus.QUEUED, RunStatus.WAITING]
    ).update(
        status=RunStatus.RUNNING,
        started_at=now,
        finished_at=None,
        error="",
        updated_at=now,
        attempts=F("attempts") + 1,
    )
    return EvaluationRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).exists()


def piece_process(*, piece_id: int) -> None:
    """Claim one piece, process it under a renewed lease, and end the run if it was the last.

    A second delivery of the same task finds the piece held or done and returns. A judge that
    stays down past its patience pauses the piece (and the run, "waiting for judge") for the
    sweeper to hand out again; a lease taken over drops this worker's writes; any other error
    fails the run with its message (a resume redoes what is missing).
    """
    piece = piece_claim(piece_id=piece_id)
    if piece is None:
        return
    run = piece.run
    if piece_park_beside_sibling(piece=piece):
        return
    if not run_start(run.pk):
        piece_end(piece=piece, status=PieceStatus.FAILED, error=f"run is {run.status}")
        return
    if piece.attempt > 1:
        _mark_lost_calls(piece)
    run.refresh_from_db()
    kind = RUN_KINDS[run.benchmark]
    keeper = LeaseKeeper(piece)
    keeper.start()
    try:
        with holding(piece):
            if kind.plan:
                import_string(kind.process)(run, piece.key)
            else:
                import_string(kind.process)(run)
            keeper.stop()
            if keeper.lost.is_set():
                raise LeaseLost(f"piece {piece.pk}: lease lost while processing")
            if piece_end(piece=piece, status=PieceStatus.DONE):
                _run_finish_if_last(run.pk, kind)
    except LeaseLost as exc:
        logger.warning("run #%s: %s; the new holder carries on", run.pk, exc)
    except JudgeUnavailable as exc:
        _pause(piece, str(exc))
    except Exception as exc:
        if database_lost(exc):
            # A restart or fail-over of the database is transient: nothing failed.
            piece_requeue_after_database_loss(piece=piece, error=exc)
            return
        message = f"{type(exc).__name__}: {exc}"
        logger.error("run #%s failed (piece %r): %s", run.pk, piece.key or "all", message)
        with holding(piece):
            try:
                run_fail(run_id=run.pk, error=message)
            except LeaseLost:
                return
        piece_end(piece=piece, status=PieceStatus.FAILED, error=message)
        raise
    finally:
        keeper.stop()


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


def _pause(piece: RunPiece, reason: str) -> None:
    if not piece_end(piece=piece, status=PieceStatus.WAITING, error=reason):
        return
    piece_park(piece=piece)
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


def _run_finish_if_last(run_id: int, kind: RunKind) -> None:
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run_id)
        if run.status not in ACTIVE_STATUSES:
            return
        if RunPiece.objects.filter(run_id=run_id).unfinished().exists():
            return
        if kind.finish:
            import_string(kind.finish)(run)
        else:
            # A single-piece processor ends its run; one that did not is ended here.
            run_finish(run=run)


def run_set_total(*, run: EvaluationRun, total: int, done: int = 0) -> None:
    run.progress_total = total
    run.progress_done = min(done, total)
    with transaction.atomic():
        lease_fence()
        EvaluationRun.objects.filter(pk=run.pk).update(
            progress_total=total, progress_done=run.progress_done, updated_at=timezone.now()
        )


def run_advance(*, run: EvaluationRun, by: int = 1) -> None:
    """Count finished items; also the heartbeat that keeps a long run from looking stale."""
    with transaction.atomic():
        lease_fence()
        EvaluationRun.objects.filter(pk=run.pk).update(
            progress_done=F("progress_done") + by, updated_at=timezone.now()
        )
    run.progress_done += by


def run_finish(
    *,
    run: EvaluationRun,
    failed_items: int = 0,
    error: str = "",
    failure_causes: list[FailureCause] | None = None,
    failure_note: str = "",
) -> EvaluationRun:
    """End a run: failed when any item could not be judged, so its metrics read incomplete.

    With failed items and no ``error``, the run's error says why they failed and what to do
    (:func:`scoring.judges.failures.headline`): resume for the causes a resume can fix, the
    setting or server to change for the others. The causes are ``failure_causes``, by default
    those of the run's failed items (:func:`run_failure_causes`); then, unless causes were
    given, the failed items by name with their reasons, and what resuming cannot fix;
    ``failure_note`` comes last. The judge's settings are fingerprinted on the run, so that a
    resume can tell whether anything a permanent failure depends on has changed.
    """
    status = RunStatus.FAILED if failed_items or error else RunStatus.SUCCEEDED
    config = None
    if failed_items and not error:
        # Given causes are used as they are; a probe run's items are named all the same
        # (its processor gives causes because it stores no row for an unlabelled response).
        named = failure_causes is None or run.benchmark == Benchmark.PROBES
        items = run_failed_items(run=run, ending=True) if named else []
        causes = failure_causes if failure_causes is not None else run_failure_causes(run=run)
        parts = (
            headline(causes, failed_items),
            describe_failed_items(items),
            permanent_text(items),
            failure_note,
        )
        error = " ".join(part for part in parts if part)
        config = {**stored_judge_config(run.pk), FINGERPRINT_KEY: run_judge_fingerprint(run)}
    with transaction.atomic():
        lease_fence()
        EvaluationRun.objects.filter(pk=run.pk).update(
            status=status,
            failed_items=failed_items,
            is_complete=not failed_items and not error,
            error=error[:10000],
            finished_at=timezone.now(),
            updated_at=timezone.now(),
            **({"judge_config": config} if config is not None else {}),
        )
    run.refresh_from_db()
    run_ended(run=run)
    # Failures are operators' business; a success is the command's own output.
    log = logger.warning if status == RunStatus.FAILED else logger.debug
    log("run #%s %s%s", run.pk, status, f": {error}" if error else "")
    return run


def run_fail(*, run_id: int, error: str) -> None:
    with transaction.atomic():
        lease_fence()
        _run_fail(run_id, error)


def _run_fail(run_id: int, error: str) -> None:
    if EvaluationRun.objects.filter(pk=run_id).update(
        status=RunStatus.FAILED,
        is_complete=False,
        error=error[:10000],
        finished_at=timezone.now(),
        updated_at=timezone.now(),
    ):
        run_ended(run=EvaluationRun.objects.get(pk=run_id))


CANCELLABLE = (RunStatus.QUEUED, RunStatus.WAITING)


def run_cancel(*, run: EvaluationRun) -> EvaluationRun:
    """Cancel a queued run, or one paused waiting for the judge (nobody holds its pieces);
    its pieces that nobody holds are dropped from the queue's view. A run in any other status
    is returned unchanged."""
    with transaction.atomic():
        if EvaluationRun.objects.filter(pk=run.pk, status__in=CANCELLABLE).update(
            status=RunStatus.CANCELLED, finished_at=timezone.now(), updated_at=timezone.now()
        ):
            RunPiece.objects.filter(
                run_id=run.pk, status__in=[PieceStatus.QUEUED, PieceStatus.WAITING]
            ).update(status=PieceStatus.FAILED, error="run cancelled")
            run.refresh_from_db()
            run_ended(run=run)
    run.refresh_from_db()
    return run


def run_is_stalled(run: EvaluationRun) -> bool:
    """An active run that nobody is working on: no piece under a live lease, none queued
    recently (its worker died before the sweeper noticed, or the queue lost its tasks)."""
    if run.status not in ACTIVE_STATUSES:
        return False
    now = timezone.now()
    grace = timedelta(seconds=float(getattr(settings, "RUN_PICKUP_GRACE_S", 30)))
    pieces = RunPiece.objects.filter(run=run)
    live = pieces.filter(status=PieceStatus.RUNNING, lease_expires_at__gte=now).exists()
    fresh = pieces.filter(status=PieceStatus.QUEUED, enqueued_at__gte=now - grace).exists()
    return not live and not fresh


@transaction.atomic
def run_resume(*, run: EvaluationRun) -> EvaluationRun:
    """Queue a failed, cancelled, paused or stalled run again; it redoes only missing items.

    Refused (:class:`RunNotResumable`, saying what to change) when every failed item would
    fail the same way again (:func:`run_resume_blocker`).
    """
    run = EvaluationRun.objects.select_for_update().get(pk=run.pk)
    resumable = run.status in (RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.WAITING)
    if not resumable and not run_is_stalled(run):
        raise RunNotResumable(
            f"Run #{run.pk} is {run.status}; only failed, cancelled, paused or stalled runs "
            "resume (a worker holds this one, or its task was sent moments ago)."
        )
    if blocker := run_resume_blocker(run):
        raise RunNotResumable(blocker)
    run.status = RunStatus.QUEUED
    run.error = ""
    run.failed_items = 0
    run.finished_at = None
    run.save(update_fields=["status", "error", "failed_items", "finished_at", "updated_at"])
    run_enqueue(run=run)
    return run


def live_clusters() -> list[Any]:
    """The qcluster processes django-q2 knows to be alive (their stats expire in seconds)."""
    from django_q.status import Stat

    try:
        return [stat for stat in Stat.get_all() if getattr(stat, "status", "") != "Stopped"]
    except Exception:  # a broker without stats: nobody known to be there
        logger.debug("no cluster stats", exc_info=True)
        return []


def run_process_here(*, run: EvaluationRun, raise_errors: bool = False) -> None:
    """Process every piece of ``run`` that nobody holds, in this process (no queue needed).

    A piece's error is recorded on the run by :func:`piece_process`; ``raise_errors`` passes
    it on too (a queue task, so that django-q2 records the task as failed).
    """
    for piece_id in RunPiece.objects.filter(
        run=run, status__in=[PieceStatus.QUEUED, PieceStatus.WAITING]
    ).values_list("pk", flat=True):
        try:
            piece_process(piece_id=piece_id)
        except Exception:
            if raise_errors:
                raise
            logger.debug("piece %s failed", piece_id, exc_info=True)


def run_wait(
    *,
    run: EvaluationRun,
    on_progress: Callable[[EvaluationRun], None] | None = None,
    on_event: Callable[[str], None] | None = None,
    poll_s: float = 0.5,
) -> EvaluationRun:
    """Wait for a run to end.

    With a live ``qcluster`` somewhere, only watch (and say which worker took the run): this
    machine does not silently become a worker. With none, or with the synchronous queue,
    process the run here. While watching, sweep this run every third of a lease, so that a
    worker that dies while someone waits is replaced without waiting for the schedule.
    """
    from benchmarks_app.services.sweeper import runs_sweep

    say = on_event or (lambda message: logger.info("%s", message))
    announced: set[str] = set()
    last_sweep = time.monotonic()
    sweep_every = float(getattr(settings, "RUN_LEASE_S", 60)) / 3
    while True:
        run.refresh_from_db()
        if on_progress:
            on_progress(run)
        if run.status not in ACTIVE_STATUSES:
            return run
        here = settings.Q_CLUSTER.get("sync") or not live_clusters()
        if here and (run.status in (RunStatus.QUEUED, RunStatus.WAITING) or run_is_stalled(run)):
            if "here" not in announced and not settings.Q_CLUSTER.get("sync"):
                say(f"run #{run.pk}: no live qcluster; processing it in this process")
                announced.add("here")
            # Pieces are cut here too: the run may come from a transaction whose commit
            # hook never ran (a script, a test), or its pieces' leases ran out.
            run_pieces_prepare(run=run)
            run_process_here(run=run)
            run.refresh_from_db()
            if run.status in ACTIVE_STATUSES:
                time.sleep(poll_s)
            continue
        for worker in RunPiece.objects.filter(run=run, status=PieceStatus.RUNNING).values_list(
            "worker", flat=True
        ):
            if worker and worker not in announced:
                announced.add(worker)
                say(f"run #{run.pk}: taken by worker {worker}")
        if time.monotonic() - last_sweep >= sweep_every:
            runs_sweep(run_ids=[run.pk])
            last_sweep = time.monotonic()
        time.sleep(poll_s)
