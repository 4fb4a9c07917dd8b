"""Runs that need an operator's eye: stuck past ``RUN_STUCK_AFTER_S``, pieces nobody took;
and why an active run waits, in one line for its pages, the API and the commands."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models.functions import Now
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus, WorkerClock
from benchmarks_app.models.judging import JudgeCall, JudgeCallStatus
from benchmarks_app.models.runs import (
    ACTIVE_STATUSES,
    WRITE_FAILURE_PREFIX,
    EvaluationRunQuerySet,
)

logger = logging.getLogger(__name__)


def stuck_after_s() -> float:
    return float(getattr(settings, "RUN_STUCK_AFTER_S", 1800))


def stuck_runs(now: datetime | None = None) -> EvaluationRunQuerySet:
    """Active runs with no progress and no lease renewal for ``RUN_STUCK_AFTER_S`` (a live
    worker's lease keeper touches its run every third of a lease, whatever the judge does)."""
    cutoff = (now or timezone.now()) - timedelta(seconds=stuck_after_s())
    return EvaluationRun.objects.filter(status__in=ACTIVE_STATUSES, updated_at__lt=cutoff)


def run_is_stuck(run: EvaluationRun) -> bool:
    return stuck_runs().filter(pk=run.pk).exists()


@dataclass(frozen=True)
class UnpickedPiece:
    key: str
    waiting_s: float
    requeues: int


def pieces_not_picked_up(run: EvaluationRun) -> list[UnpickedPiece]:
    """The run's queued pieces that no worker took within ``RUN_PICKUP_GRACE_S`` of being sent
    (every cluster busy, none running, or one that cannot read the queue)."""
    now = timezone.now()
    grace = timedelta(seconds=float(getattr(settings, "RUN_PICKUP_GRACE_S", 30)))
    pieces = RunPiece.objects.filter(
        run=run, status=PieceStatus.QUEUED, enqueued_at__lt=now - grace
    ).order_by("enqueued_at")
    return [
        UnpickedPiece(
            key=piece.key or "all",
            waiting_s=(now - piece.enqueued_at).total_seconds() if piece.enqueued_at else 0.0,
            requeues=piece.requeues,
        )
        for piece in pieces
    ]


# A host not measured for this long (no worker started nor swept there) is not reported.
CLOCK_REPORT_WITHIN = timedelta(hours=1)


def worker_clock_skews() -> dict[str, float]:
    """Per worker host measured lately: the database's clock minus the host's, in seconds
    (:func:`~benchmarks_app.services.leases.worker_clock_record`)."""
    recent = WorkerClock.objects.filter(measured_at__gte=Now() - CLOCK_REPORT_WITHIN)
    return dict(recent.order_by("host").values_list("host", "skew_s"))


def live_clusters() -> list[Any]:
    """The qcluster processes django-q2 knows to be alive (their stats expire in seconds)."""
    from django_q.status import Stat

    try:
        return [
            stat
            for stat in Stat.get_all()
            # Only clusters' own stats: anything else a broker lists there is not a worker.
            if getattr(stat, "cluster_id", None) and getattr(stat, "status", "") != "Stopped"
        ]
    except Exception:  # a broker without stats: nobody known to be there
        logger.debug("no cluster stats", exc_info=True)
        return []


def _queue_is_sync() -> bool:
    # django-q2's own switch (Q_SYNC): a task sent is run there and then, by no worker.
    from django_q.conf import Conf

    return bool(Conf.SYNC)


@dataclass(frozen=True)
class WaitingReason:
    """Why an active run is not moving, in one line (``text``), for people.

    ``kind``: ``judge`` (its judge does not answer: a worker rides the outage out, or the run
    is paused until the next try), ``storage`` (a write was refused for want of space) or
    ``worker`` (no worker has picked it up, or its worker stopped answering). ``since``: when
    the wait began, where known; ``next_try_at``: when the judge or the write is tried again
    (None while a try is under way).
    """

    kind: str
    text: str
    since: datetime | None = None
    next_try_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text": self.text,
            "since": self.since.isoformat() if self.since else None,
            "next_try_at": self.next_try_at.isoformat() if self.next_try_at else None,
        }


def _clock(value: datetime) -> str:
    return f"{timezone.localtime(value):%H:%M:%S}"


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


def _earliest(values: list[Any]) -> datetime | None:
    times = [t for t in (_when(v) for v in values) if t is not None]
    return min(times) if times else None


def run_waiting_reason(run: EvaluationRun) -> WaitingReason | None:
    """Why ``run`` waits, or None (it has ended, or a worker is working on it unhindered).

    The one place that says it: the run's pages, ``GET /api/runs/<id>/`` and the commands'
    ``--wait`` render this. Read from what the workers record on the run's pieces: the judge
    outage a worker is riding out (``RunPiece.judge_outage``, up to
    ``JUDGE_OUTAGE_PATIENCE_S``), pieces parked on the judge or on a full disk (``retry_at``),
    pieces queued that no live cluster will take, or past ``RUN_PICKUP_GRACE_S``, and leases
    that ran out.
    """
    if run.status not in ACTIVE_STATUSES:
        return None
    pieces = RunPiece.objects.filter(run_id=run.pk)
    live = pieces.filter(status=PieceStatus.RUNNING, lease_expires_at__gte=Now())
    down = list(live.filter(judge_outage__has_key="since").values_list("judge_outage", flat=True))
    if down:
        return _judge_down(run, down)
    parked = list(
        pieces.filter(status=PieceStatus.WAITING).values("error", "retry_at", "judge_outage")
    )
    if parked:
        return _parked(run, parked)
    if live.exists():
        # Working: progress says the rest, unless the judge has been quiet for a while.
        return _judge_quiet(run)
    queued = list(pieces.filter(status=PieceStatus.QUEUED).values_list("enqueued_at", flat=True))
    if queued or run.status == RunStatus.QUEUED:
        return _not_picked_up(run, queued)
    expired = _earliest(
        list(
            pieces.filter(status=PieceStatus.RUNNING, lease_expires_at__lt=Now()).values_list(
                "lease_expires_at", flat=True
            )
        )
    )
    if expired is not None:
        return WaitingReason(
            kind="worker",
            text=f"Its worker stopped answering (its lease ran out at {_clock(expired)}); the "
            "sweeper hands its work to another worker.",
            since=expired,
        )
    return None


def _judge_down(run: EvaluationRun, outages: list[dict[str, Any]]) -> WaitingReason:
    """A worker holds the run and waits for its judge, one probe call at a time."""
    since = _earliest([o.get("since") for o in outages])
    tries = [o.get("next_try") for o in outages]
    # A probe in flight on any piece is a try under way.
    next_try = None if any(t is None for t in tries) else _earliest(tries)
    gives_up = _earliest([o.get("gives_up_at") for o in outages])
    error = next((str(o["error"]) for o in outages if o.get("error")), "")
    parts = [f"Judge {run.judge_label} unreachable since {_clock(since) if since else '?'}"]
    parts.append(f"next try at {_clock(next_try)}" if next_try else "trying it now")
    text = ", ".join(parts) + (f" ({error})." if error else ".")
    if gives_up is not None:
        text += (
            f" If it stays down, the run pauses at {_clock(gives_up)} "
            f"(JUDGE_OUTAGE_PATIENCE_S) and tries again every {_park_s()} s."
        )
    return WaitingReason(kind="judge", text=text, since=since, next_try_at=next_try)


def judge_quiet_after_s() -> float:
    """``RUN_JUDGE_QUIET_AFTER_S``: how long a request to the judge may go unanswered before
    the run's page says so (default 10 s)."""
    return float(getattr(settings, "RUN_JUDGE_QUIET_AFTER_S", 10))


# Calls the judge answered (a verdict, readable or not): an error is a failed try.
_ANSWERED = (JudgeCallStatus.OK, JudgeCallStatus.INVALID, JudgeCallStatus.TRUNCATED)


def _judge_quiet(run: EvaluationRun) -> WaitingReason | None:
    """A worker holds the run and its judge has not answered for ``RUN_JUDGE_QUIET_AFTER_S``
    while its breaker is still closed (the call waits, or retries run): before the breaker
    opens the pieces record no outage, and the page said nothing for minutes (issue 37). The
    ledger's requests in flight (``pending``, written as they go out) say since when."""
    calls = JudgeCall.objects.filter(run_id=run.pk)
    asked = (
        calls.filter(status=JudgeCallStatus.PENDING)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    if asked is None:
        return None
    quiet_s = (timezone.now() - asked).total_seconds()
    if quiet_s < judge_quiet_after_s():
        return None
    answered = (
        calls.filter(status__in=_ANSWERED)
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    errors = calls.filter(status=JudgeCallStatus.ERROR)
    failed = (errors.filter(created_at__gt=answered) if answered else errors).count()
    retries = (
        f"; {failed} failed tr{'y' if failed == 1 else 'ies'} since its last answer, retrying"
        if failed
        else ""
    )
    return WaitingReason(
        kind="judge",
        text=f"Calling judge {run.judge_label}; no answer for {quiet_s:.0f} s (asked at "
        f"{_clock(asked)}){retries}.",
        since=asked,
    )


def _park_s() -> int:
    return int(getattr(settings, "RUN_PARK_RETRY_S", 60))


def _parked(run: EvaluationRun, parked: list[Any]) -> WaitingReason:
    """Pieces parked until their retry time: on a full disk, or on a judge that stayed down."""
    now = timezone.now()
    retry = _earliest([p["retry_at"] for p in parked])
    when = f"next try at {_clock(retry)}" if retry and retry > now else "trying it again now"
    storage = [p for p in parked if str(p["error"]).startswith(WRITE_FAILURE_PREFIX)]
    if storage:
        cause = str(storage[0]["error"])[len(WRITE_FAILURE_PREFIX) :]
        return WaitingReason(
            kind="storage",
            text=f"Waiting for storage: {cause}; {when}.",
            next_try_at=retry if retry and retry > now else None,
        )
    outages = [p["judge_outage"] for p in parked if isinstance(p["judge_outage"], dict)]
    since = _earliest([o.get("since") for o in outages])
    error = next((str(o["error"]) for o in outages if o.get("error")), "")
    text = (
        f"Judge {run.judge_label} unreachable since {_clock(since) if since else '?'}, {when}"
        f"{f' ({error})' if error else ''}. Paused meanwhile: no worker is held."
    )
    return WaitingReason(
        kind="judge", text=text, since=since, next_try_at=retry if retry and retry > now else None
    )


def _not_picked_up(run: EvaluationRun, queued: list[Any]) -> WaitingReason | None:
    """Queued pieces that no worker has taken: none can (no live cluster), or none has yet."""
    since = _earliest(queued) or run.created_at
    if _queue_is_sync():
        return None  # a task sent is run by the sender itself
    if not live_clusters():
        return WaitingReason(
            kind="worker",
            text=f"No worker has picked it up (queued since {_clock(since)}): no qcluster is "
            "running. An operator starts one with: python manage.py qcluster",
            since=since,
        )
    grace = timedelta(seconds=float(getattr(settings, "RUN_PICKUP_GRACE_S", 30)))
    if since > timezone.now() - grace:
        return None
    return WaitingReason(
        kind="worker",
        text=f"No worker has picked it up since {_clock(since)}: every worker is busy with "
        "other runs, or none can read the queue.",
        since=since,
    )


def run_end_text(run: EvaluationRun) -> str:
    """Why an ended run did not succeed, for a command's last line: its error, or for a
    cancelled run (which has none) when it was cancelled and what it kept."""
    if run.status == RunStatus.CANCELLED:
        when = f" at {_clock(run.finished_at)}" if run.finished_at else ""
        return (
            f"cancelled{when} with {run.progress_done}/{run.progress_total} items judged; what "
            "was judged is kept, and a resume judges only what is missing"
        )
    return run.error or run.get_status_display().lower()
