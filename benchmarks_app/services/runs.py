"""The evaluation-run life cycle shared by all three benchmarks.

A run is claimed atomically before it is processed (``queued``/stale ``running`` →
``running``), so a task that django-q2 hands out twice, or a ``--wait`` caller that processes
the run itself while a worker also picks it up, never repeats the work.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from benchmarks_app.models import Benchmark, EvaluationRun, RunStatus
from benchmarks_app.selectors.runs import run_failure_causes
from scoring.judges.failures import FailureCause, headline

# Dotted paths of the task that processes a run of each benchmark.
RUN_TASKS: dict[str, str] = {
    Benchmark.AUDIT: "benchmarks_app.tasks.audit.process_audit_run",
    Benchmark.PROBES: "benchmarks_app.tasks.probes.process_probe_run",
    Benchmark.CHECKLIST: "benchmarks_app.tasks.checklist.process_checklist_run",
}

# A running run whose heartbeat is older than this is considered crashed and may be claimed.
STALE_AFTER = timedelta(minutes=10)


class RunNotResumable(Exception):
    pass


def _task_path(run: EvaluationRun) -> str:
    return RUN_TASKS[run.benchmark]


def run_enqueue(*, run: EvaluationRun) -> None:
    """Hand the run to django-q2 once the surrounding transaction has committed."""
    from django_q.tasks import async_task

    run_id = run.pk
    path = _task_path(run)

    def _send() -> None:
        task_id = async_task(path, run_id, task_name=f"{run.benchmark}-run-{run_id}")
        # In sync mode the task has already run; keep the id for the admin either way.
        EvaluationRun.objects.filter(pk=run_id).update(task_id=str(task_id or "")[:64])

    transaction.on_commit(_send)


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


def run_claim(*, run_id: int) -> EvaluationRun | None:
    """Atomically move a run to ``running``; ``None`` when someone else holds it or it ended."""
    now = timezone.now()
    stale_before = now - STALE_AFTER
    claimable = EvaluationRun.objects.filter(pk=run_id).filter(
        status=RunStatus.QUEUED
    ) | EvaluationRun.objects.filter(
        pk=run_id, status=RunStatus.RUNNING, updated_at__lt=stale_before
    )
    updated = claimable.update(
        status=RunStatus.RUNNING,
        started_at=now,
        finished_at=None,
        updated_at=now,
        attempts=F("attempts") + 1,
    )
    if not updated:
        return None
    return EvaluationRun.objects.get(pk=run_id)


def run_set_total(*, run: EvaluationRun, total: int, done: int = 0) -> None:
    run.progress_total = total
    run.progress_done = min(done, total)
    EvaluationRun.objects.filter(pk=run.pk).update(
        progress_total=total, progress_done=run.progress_done, updated_at=timezone.now()
    )


def run_advance(*, run: EvaluationRun, by: int = 1) -> None:
    """Count finished items; also the heartbeat that keeps a long run from looking stale."""
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
    those of the run's failed items (:func:`run_failure_causes`); ``failure_note`` follows.
    """
    status = RunStatus.FAILED if failed_items or error else RunStatus.SUCCEEDED
    if failed_items and not error:
        causes = failure_causes if failure_causes is not None else run_failure_causes(run=run)
        error = " ".join(part for part in (headline(causes, failed_items), failure_note) if part)
    EvaluationRun.objects.filter(pk=run.pk).update(
        status=status,
        failed_items=failed_items,
        is_complete=not failed_items and not error,
        error=error[:10000],
        finished_at=timezone.now(),
        updated_at=timezone.now(),
    )
    run.refresh_from_db()
    return run


def run_fail(*, run_id: int, error: str) -> None:
    EvaluationRun.objects.filter(pk=run_id).update(
        status=RunStatus.FAILED,
        is_complete=False,
        error=error[:10000],
        finished_at=timezone.now(),
        updated_at=timezone.now(),
    )


def run_cancel(*, run: EvaluationRun) -> EvaluationRun:
    EvaluationRun.objects.filter(pk=run.pk, status__in=[RunStatus.QUEUED]).update(
        status=RunStatus.CANCELLED, finished_at=timezone.now()
    )
    run.refresh_from_db()
    return run


@transaction.atomic
def run_resume(*, run: EvaluationRun) -> EvaluationRun:
    """Queue a failed (or crashed) run again; its task redoes only the missing items."""
    run = EvaluationRun.objects.select_for_update().get(pk=run.pk)
    stale = run.status == RunStatus.RUNNING and run.updated_at < timezone.now() - STALE_AFTER
    if run.status not in (RunStatus.FAILED, RunStatus.CANCELLED) and not stale:
        raise RunNotResumable(f"Run #{run.pk} is {run.status}; only failed or stalled runs resume.")
    run.status = RunStatus.QUEUED
    run.error = ""
    run.failed_items = 0
    run.finished_at = None
    run.save(update_fields=["status", "error", "failed_items", "finished_at", "updated_at"])
    run_enqueue(run=run)
    return run


def process_run(*, run_id: int, processor: Callable[[EvaluationRun], None]) -> None:
    """Claim the run and call ``processor``; any exception fails the run with its message.

    ``processor`` must skip items that already have results, so that a resumed run redoes
    only what is missing, and end by calling :func:`run_finish`.
    """
    run = run_claim(run_id=run_id)
    if run is None:
        return
    try:
        processor(run)
    except Exception as exc:
        run_fail(run_id=run_id, error=f"{type(exc).__name__}: {exc}")
        raise


def run_wait(
    *,
    run: EvaluationRun,
    on_progress: Callable[[EvaluationRun], None] | None = None,
    poll_s: float = 0.5,
    pickup_grace_s: float | None = None,
) -> EvaluationRun:
    """Wait for a run to end. When no worker claims it within the grace period, process it here.

    That lets ``--wait`` commands work with no ``qcluster`` running, while a running cluster
    still does the work when it is there (the claim makes the two exclusive).
    """
    from django.utils.module_loading import import_string

    grace = (
        pickup_grace_s
        if pickup_grace_s is not None
        else (0.0 if settings.Q_CLUSTER.get("sync") else 3.0)
    )
    started = time.monotonic()
    while True:
        run.refresh_from_db()
        if on_progress:
            on_progress(run)
        if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
            return run
        if run.status == RunStatus.QUEUED and time.monotonic() - started >= grace:
            task = import_string(_task_path(run))
            # A failure is already recorded on the run by process_run.
            with contextlib.suppress(Exception):
                task(run.pk)
            continue
        time.sleep(poll_s)
