"""The evaluation-run life cycle shared by all three benchmarks: create, cancel, resume, wait.

A run is cut into pieces, each processed under a lease of its own (:mod:`.scheduling`, with
:mod:`.leases`); its state moves in :mod:`.run_state`; what no live worker does is handed out
again by :mod:`.sweeper`. Imports point one way: this module → :mod:`.sweeper` →
:mod:`.scheduling` → :mod:`.piece_running` → :mod:`.run_recovery` → :mod:`.piece_sending` →
:mod:`.run_state` → :mod:`.leases`. The names of those modules that callers used to import
from here are re-exported.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus
from benchmarks_app.models.runs import ACTIVE_STATUSES, PIECE_CANCELLED_ERROR
from benchmarks_app.selectors.run_health import live_clusters, run_waiting_reason
from benchmarks_app.selectors.runs import run_resume_blocker
from benchmarks_app.services.piece_sending import (
    PIECE_TASK,
    piece_send,
    run_enqueue,
    run_is_stalled,
    run_pieces_prepare,
)
from benchmarks_app.services.run_events import run_ended
from benchmarks_app.services.run_recovery import run_parked_beside_until
from benchmarks_app.services.run_state import (
    RUN_KINDS,
    RunKind,
    run_advance,
    run_fail,
    run_finish,
    run_finish_if_last,
    run_plan,
    run_set_total,
    run_start,
)
from benchmarks_app.services.scheduling import piece_process, run_process_all, run_process_here
from benchmarks_app.services.sweeper import runs_sweep

__all__ = [
    "CANCELLABLE",
    "PIECE_TASK",
    "RUN_KINDS",
    "RunKind",
    "RunNotResumable",
    "live_clusters",
    "piece_process",
    "piece_send",
    "run_advance",
    "run_cancel",
    "run_create",
    "run_enqueue",
    "run_fail",
    "run_finish",
    "run_finish_if_last",
    "run_is_stalled",
    "run_pieces_prepare",
    "run_plan",
    "run_process_all",
    "run_process_here",
    "run_resume",
    "run_set_total",
    "run_start",
    "run_wait",
]

logger = logging.getLogger(__name__)


class RunNotResumable(Exception):
    pass


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


# Running runs included: their pieces stop between judge calls (see run_cancel).
CANCELLABLE = (RunStatus.QUEUED, RunStatus.WAITING, RunStatus.RUNNING)


def run_cancel(*, run: EvaluationRun) -> EvaluationRun:
    """Cancel a queued, paused or running run; one that has ended is returned unchanged.

    The run is ``cancelled`` at once, with what was judged kept (a resume redoes only what
    is missing). Pieces nobody holds end here; a worker holding one notices within
    ``RUN_CANCEL_POLL_S`` (its lease keeper watches the run), cancels its judge calls in
    flight, records them as abandoned and ends its piece. Calls left pending by a holder
    whose lease has expired (its worker is gone) are recorded as abandoned here.
    """
    from benchmarks_app.services.judging import judge_calls_abandon
    from benchmarks_app.services.leases import lease_holder

    with transaction.atomic():
        now = timezone.now()
        if EvaluationRun.objects.filter(pk=run.pk, status__in=CANCELLABLE).update(
            status=RunStatus.CANCELLED, finished_at=now, updated_at=now
        ):
            unheld = Q(status__in=[PieceStatus.QUEUED, PieceStatus.WAITING]) | Q(
                status=PieceStatus.RUNNING, lease_expires_at__lt=Now()
            )
            for piece in RunPiece.objects.filter(Q(run_id=run.pk) & unheld):
                for attempt in range(1, piece.attempt + 1):
                    judge_calls_abandon(holder=lease_holder(RunPiece(pk=piece.pk, attempt=attempt)))
            RunPiece.objects.filter(Q(run_id=run.pk) & unheld).update(
                status=PieceStatus.FAILED, error=PIECE_CANCELLED_ERROR, lease_expires_at=None
            )
            run.refresh_from_db()
            run_ended(run=run)
    run.refresh_from_db()
    return run


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


def run_wait(
    *,
    run: EvaluationRun,
    on_progress: Callable[[EvaluationRun], None] | None = None,
    on_event: Callable[[str], None] | None = None,
    poll_s: float = 0.2,
) -> EvaluationRun:
    """Wait for a run to end.

    With a live ``qcluster`` somewhere, only watch (and say which worker took the run): this
    machine does not silently become a worker. With none, or with the synchronous queue,
    process the run here. While watching, sweep this run every third of a lease, so that a
    worker that dies while someone waits is replaced without waiting for the schedule.
    """
    say = on_event or (lambda message: logger.info("%s", message))
    announced: set[str] = set()
    last_sweep = time.monotonic()
    sweep_every = float(getattr(settings, "RUN_LEASE_S", 60)) / 3
    why = _WaitingTeller(run.pk, say)
    while True:
        run.refresh_from_db()
        if on_progress:
            on_progress(run)
        if run.status not in ACTIVE_STATUSES:
            return run
        here = settings.Q_CLUSTER.get("sync") or not live_clusters()
        if not here:
            why.tell(run)  # a worker has it (or should have): say why it waits, as it changes
        if here and run.status == RunStatus.WAITING and (until := run_parked_beside_until(run)):
            # Another run found the judge down: its pieces would only be parked beside it.
            if "parked" not in announced:
                say(f"run #{run.pk}: the judge is down; trying it again at {until:%H:%M:%S}")
                announced.add("parked")
            time.sleep(poll_s)
            continue
        if here and (run.status in (RunStatus.QUEUED, RunStatus.WAITING) or run_is_stalled(run)):
            if "here" not in announced and not settings.Q_CLUSTER.get("sync"):
                say(f"run #{run.pk}: no live qcluster; processing it in this process")
                announced.add("here")
            # Pieces are cut here too: the run may come from a transaction whose commit
            # hook never ran (a script, a test), or its pieces' leases ran out.
            run_pieces_prepare(run=run)
            with why.watching(run):
                run_process_here(
                    run=run,
                    processes=1
                    if settings.Q_CLUSTER.get("sync")
                    else int(getattr(settings, "RUN_PROCESSES_HERE", 2)),
                )
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
        _sleep_while_active(run, poll_s)


# While only watching, how often the run's status alone is looked at between two full looks
# (progress, workers, why it waits: several queries each).
WATCH_STATUS_S = 0.05


def _sleep_while_active(run: EvaluationRun, seconds: float) -> None:
    """Sleep up to ``seconds``, looking every :data:`WATCH_STATUS_S` whether the run ended: the
    command then returns within 50 ms of the end (it waited 0.1 s on average for its next
    look, 1% of the documented audit's 10 s), for one indexed read each time."""
    steps = max(1, round(seconds / WATCH_STATUS_S))
    for _ in range(steps):
        time.sleep(seconds / steps)
        if not EvaluationRun.objects.filter(pk=run.pk, status__in=ACTIVE_STATUSES).exists():
            return


# How often run_wait looks why the run it processes itself waits.
WAIT_TELL_S = 1.0


class _WaitingTeller:
    """Says why a waited-for run waits (:func:`run_waiting_reason`, the line its page shows),
    each time that changes; and, while this process works on the run itself, from a thread
    that looks every :data:`WAIT_TELL_S` (the pieces' workers record what they meet)."""

    def __init__(self, run_id: int, say: Callable[[str], None]) -> None:
        self.run_id = run_id
        self.say = say
        self.last = ""
        self._lock = threading.Lock()

    def tell(self, run: EvaluationRun) -> None:
        reason = run_waiting_reason(run)
        text = reason.text if reason is not None else ""
        with self._lock:
            if text == self.last:
                return
            said_before = self.last
            self.last = text
        if text:
            self.say(f"run #{self.run_id}: {text}")
        elif said_before:
            self.say(f"run #{self.run_id}: under way again")

    @contextmanager
    def watching(self, run: EvaluationRun) -> Iterator[None]:
        """Tell from a thread while the caller processes ``run`` (not inside a transaction:
        another connection would not see its rows)."""
        if transaction.get_connection().in_atomic_block:
            yield
            return
        stop = threading.Event()
        every = WAIT_TELL_S

        def watch() -> None:
            try:
                while not stop.wait(every):
                    try:
                        current = EvaluationRun.objects.get(pk=run.pk)
                        if current.status not in ACTIVE_STATUSES:
                            return
                        self.tell(current)
                    except Exception:  # telling is a courtesy: never the run's problem
                        logger.debug("run #%s: could not tell why it waits", run.pk, exc_info=True)
            finally:
                connections.close_all()

        thread = threading.Thread(target=watch, name=f"run-{run.pk}-why", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=10)
