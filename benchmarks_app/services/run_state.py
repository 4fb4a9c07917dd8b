"""A run's state as its pieces move it: start, progress, end (all three benchmarks).

The bottom of the run services: :mod:`.scheduling` (pieces, queue, claims), :mod:`.sweeper`
and :mod:`.runs` (create, cancel, resume, wait) import from here, never the other way round.
Processors (``RUN_KINDS``) are named by dotted path, so that their modules may import this one.
Every write made while a piece is held is fenced by its lease
(:func:`~benchmarks_app.services.leases.lease_fence`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest, Least, Now
from django.utils import timezone
from django.utils.module_loading import import_string

from benchmarks_app.models import (
    Benchmark,
    EvaluationRun,
    JudgeCall,
    PieceStatus,
    RunPiece,
    RunStatus,
)
from benchmarks_app.models.judging import JudgeCallStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.selectors.runs import (
    FINGERPRINT_KEY,
    describe_failed_items,
    permanent_text,
    run_failed_items,
    run_failure_causes,
    run_judge_fingerprint,
    stored_judge_config,
)
from benchmarks_app.services.leases import lease_fence, lease_holder
from benchmarks_app.services.run_events import run_ended
from scoring.judges.failures import FailureCause, headline

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunKind:
    """How a benchmark's runs are cut and processed (dotted paths: services import this module).

    ``plan(run)`` lists the keys of the pieces still to do; ``process(run, key)`` does one and
    must skip items that already have results, so that a piece done again redoes only what is
    missing; ``finish(run)``, when given, ends the run once every piece has ended (otherwise
    ``process`` ends it, as single-piece runs do); ``weigh(run)``, when given, estimates each
    piece's work by key (:func:`run_piece_weights`).
    """

    process: str
    plan: str | None = None
    finish: str | None = None
    weigh: str | None = None


RUN_KINDS: dict[str, RunKind] = {
    Benchmark.AUDIT: RunKind(
        plan="benchmarks_app.services.audit.processing.audit_run_plan",
        process="benchmarks_app.services.audit.processing.audit_process_piece",
        finish="benchmarks_app.services.audit.processing.audit_run_finish",
        weigh="benchmarks_app.services.audit.processing.audit_piece_weights",
    ),
    Benchmark.PROBES: RunKind(process="benchmarks_app.services.probes.probe_run_process"),
    Benchmark.CHECKLIST: RunKind(process="benchmarks_app.services.checklist.process_checklist"),
}


def run_plan(run: EvaluationRun) -> list[str]:
    kind = RUN_KINDS[run.benchmark]
    return list(import_string(kind.plan)(run)) if kind.plan else [""]


def run_piece_weights(run: EvaluationRun) -> dict[str, int]:
    """Each piece's estimated work by key, as its kind weighs it (a key left out weighs 1).

    Pieces are handed out heaviest first, and a ``--wait`` command's processes share them by
    weight: a run is as long as its longest piece, and that piece is a chain of judge rounds
    that only goes faster when nothing else holds its process's GIL or the queue's first
    place (issue 38).
    """
    kind = RUN_KINDS[run.benchmark]
    return dict(import_string(kind.weigh)(run)) if kind.weigh else {}


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


def run_finish_if_last(run_id: int, kind: RunKind) -> bool:
    """End the run (``kind.finish``, or :func:`run_finish`) once none of its pieces is left;
    True when this call is the one that found it so (the run's end is this caller's)."""
    with transaction.atomic():
        run = EvaluationRun.objects.select_for_update().get(pk=run_id)
        if run.status not in ACTIVE_STATUSES:
            return False
        if RunPiece.objects.filter(run_id=run_id).unfinished().exists():
            return False
        if kind.finish:
            import_string(kind.finish)(run)
        else:
            # A single-piece processor ends its run; one that did not is ended here.
            run_finish(run=run)
        return True


def run_set_total(*, run: EvaluationRun, total: int, done: int = 0) -> None:
    """Set the run's total, and its done count from what is stored; the count never goes
    backwards (within the total).

    Pieces run side by side: ``done`` is counted before this update, while a sibling piece
    may advance the counter in between (SQLite's writers take turns for seconds). Written as
    is, the stale count once took a cancelled run's counter from 46/188 back to 7/188 for
    good (a cancelled run never reaches the end's recount); the larger of the two is right,
    since every advance is stored with the result it counts.
    """
    with transaction.atomic():
        lease_fence()
        EvaluationRun.objects.filter(pk=run.pk).update(
            progress_total=total,
            progress_done=Least(Greatest(F("progress_done"), Value(done)), Value(total)),
            updated_at=timezone.now(),
        )
    run.progress_total = total
    run.progress_done = (
        EvaluationRun.objects.filter(pk=run.pk).values_list("progress_done", flat=True).first() or 0
    )


def run_advance(*, run: EvaluationRun, by: int = 1) -> None:
    """Count finished items; also the heartbeat that keeps a long run from looking stale."""
    with transaction.atomic():
        lease_fence()
        EvaluationRun.objects.filter(pk=run.pk).update(
            # Within the total: a counter kept from before a resume (run_set_total keeps the
            # larger count) must not pass it as the resumed items are counted again.
            progress_done=Least(F("progress_done") + by, F("progress_total")),
            updated_at=timezone.now(),
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
        # A run cancelled meanwhile stays cancelled.
        ended = (
            EvaluationRun.objects.filter(pk=run.pk)
            .exclude(status=RunStatus.CANCELLED)
            .update(
                status=status,
                failed_items=failed_items,
                is_complete=not failed_items and not error,
                error=error[:10000],
                finished_at=timezone.now(),
                updated_at=timezone.now(),
                **({"judge_config": config} if config is not None else {}),
            )
        )
    run.refresh_from_db()
    if not ended:
        return run
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
    if (
        EvaluationRun.objects.filter(pk=run_id)
        .exclude(status=RunStatus.CANCELLED)
        .update(
            status=RunStatus.FAILED,
            is_complete=False,
            error=error[:10000],
            finished_at=timezone.now(),
            updated_at=timezone.now(),
        )
    ):
        run_pieces_settle(run_id=run_id, reason="run failed")
        run_ended(run=EvaluationRun.objects.get(pk=run_id))


def pieces_calls_mark_lost(*, pieces: list[tuple[int, int]], reason: str) -> int:
    """Record ``lost`` the judge calls left ``pending`` by every holder so far of each
    ``(piece id, attempt)``: nobody will complete them any more."""
    holders = [
        lease_holder(RunPiece(pk=pk, attempt=attempt))
        for pk, last in pieces
        for attempt in range(1, last + 1)
    ]
    if not holders:
        return 0
    return JudgeCall.objects.filter(holder__in=holders, status=JudgeCallStatus.PENDING).update(
        status=JudgeCallStatus.LOST, error=f"in flight when its holder was given up ({reason})"
    )


def run_pieces_settle(*, run_id: int, reason: str) -> int:
    """End the pieces of an ended run that nobody holds (queued, parked, or held under a
    lease that has expired: its worker is gone), with ``reason``; the judge calls their dead
    holders left ``pending`` are recorded ``lost``, so no ledger row waits for ever.

    A piece held under a live lease is left to its worker: its lease keeper sees the run has
    ended, stops the piece's calls in flight (recorded abandoned) and ends it. A worker that
    dies first leaves an expired lease, which the sweeper settles here. Returns how many
    pieces ended.
    """
    unheld = Q(status__in=[PieceStatus.QUEUED, PieceStatus.WAITING]) | Q(
        status=PieceStatus.RUNNING, lease_expires_at__lt=Now()
    )
    with transaction.atomic():
        pieces = list(
            RunPiece.objects.select_for_update()
            .filter(Q(run_id=run_id) & unheld)
            .values_list("pk", "attempt")
        )
        pieces_calls_mark_lost(pieces=pieces, reason=reason)
        return RunPiece.objects.filter(pk__in=[pk for pk, _ in pieces]).update(
            status=PieceStatus.FAILED,
            lease_expires_at=None,
            retry_at=None,
            finished_at=Now(),
            error=reason,
        )
