"""Figures for Prometheus, read from the database and the broker at scrape time.

Everything comes from shared state (the runs, pieces and judge ledger tables; the broker), so
one scrape of any web process sees every cluster's work, and a restart loses no counter.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Count, Q, Sum

from benchmarks_app.models import EvaluationRun, JudgeCall, PieceStatus, RunPiece, RunStatus
from benchmarks_app.models.runs import PIECE_CANCELLED_ERROR
from benchmarks_app.selectors.health import clusters_alive
from benchmarks_app.selectors.run_health import stuck_runs, worker_clock_skews

logger = logging.getLogger(__name__)

# Upper bounds (seconds) of the judge-call latency histogram.
# The piece state /metrics adds to PieceStatus's: ended by its run's cancel.
PIECE_CANCELLED = "cancelled"

LATENCY_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


@dataclass
class Metrics:
    runs: dict[tuple[str, str], int] = field(default_factory=dict)  # (benchmark, state)
    runs_stuck: int = 0
    pieces: dict[str, int] = field(default_factory=dict)
    pieces_requeued: int = 0
    pieces_parked_on_write_failure: int = 0
    queue_depth: int | None = None
    clusters_alive: int | None = None
    # Per worker host measured lately: the database's clock minus the host's (seconds).
    clock_skew_s: dict[str, float] = field(default_factory=dict)
    judge_calls: dict[str, int] = field(default_factory=dict)
    # Answered calls: cumulative count per bucket bound, then the total count and sum.
    latency_buckets: list[tuple[float, int]] = field(default_factory=list)
    latency_count: int = 0
    latency_sum_s: float = 0.0


def _queue_depth() -> int | None:
    from django_q.brokers import get_broker

    if settings.Q_CLUSTER.get("sync"):
        return 0
    try:
        return int(get_broker().queue_size() or 0)
    except Exception:
        logger.warning("metrics: the broker's queue size is unknown", exc_info=True)
        return None


def site_metrics() -> Metrics:
    from benchmarks_app.models import Benchmark
    from benchmarks_app.models.judging import JudgeCallStatus

    m = Metrics()
    for benchmark in Benchmark.values:
        for state in RunStatus.values:
            m.runs[(benchmark, state)] = 0
    for row in EvaluationRun.objects.values("benchmark", "status").annotate(n=Count("id")):
        m.runs[(row["benchmark"], row["status"])] = row["n"]
    m.runs_stuck = stuck_runs().count()
    # Pieces a cancel ended are stored as failed (every reader of ended pieces stays as it
    # is), but they did not fail: they count as cancelled.
    m.pieces = dict.fromkeys([*PieceStatus.values, PIECE_CANCELLED], 0)
    by_status = RunPiece.objects.values("status").annotate(
        n=Count("id"), cancelled=Count("id", filter=Q(error=PIECE_CANCELLED_ERROR))
    )
    for row in by_status:
        cancelled = row["cancelled"] if row["status"] == PieceStatus.FAILED else 0
        m.pieces[row["status"]] = row["n"] - cancelled
        m.pieces[PIECE_CANCELLED] += cancelled
    m.pieces_requeued = RunPiece.objects.aggregate(n=Sum("requeues"))["n"] or 0
    m.pieces_parked_on_write_failure = RunPiece.objects.parked_on_write_failure().count()
    m.queue_depth = _queue_depth()
    m.clusters_alive = clusters_alive()
    m.clock_skew_s = worker_clock_skews()
    m.judge_calls = dict.fromkeys(JudgeCallStatus.values, 0)
    for row in JudgeCall.objects.values("status").annotate(n=Count("id")):
        m.judge_calls[row["status"]] = row["n"]
    # Answered calls only: a cache hit costs no time, a pending, lost or interrupted call
    # has none.
    answered = JudgeCall.objects.exclude(
        status__in=[
            JudgeCallStatus.CACHED,
            JudgeCallStatus.PENDING,
            JudgeCallStatus.LOST,
            JudgeCallStatus.INTERRUPTED,
        ]
    )
    figures = answered.aggregate(
        count=Count("id"),
        total=Sum("latency_ms"),
        **{
            f"le_{i}": Count("id", filter=Q(latency_ms__lte=bound * 1000))
            for i, bound in enumerate(LATENCY_BUCKETS_S)
        },
    )
    m.latency_buckets = [
        (bound, figures[f"le_{i}"] or 0) for i, bound in enumerate(LATENCY_BUCKETS_S)
    ]
    m.latency_count = figures["count"] or 0
    m.latency_sum_s = (figures["total"] or 0.0) / 1000
    return m
