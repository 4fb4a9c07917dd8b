"""What operators poll from outside: ``/health/`` for a load balancer or Kubernetes probe,
``/metrics`` for Prometheus (staff, or ``Authorization: Bearer <METRICS_TOKEN>``)."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from benchmarks_app.selectors.health import (
    Health,
    clusters_state,
    queue_health,
    short_database_timeouts,
    site_health,
)
from benchmarks_app.selectors.metrics import Metrics, site_metrics
from benchmarks_app.selectors.run_health import worker_clock_skews
from benchmarks_app.services.queue_canary import queue_canary_write, queue_key_problem

logger = logging.getLogger(__name__)


def _answer(report: Health, **extra: Any) -> JsonResponse:
    return JsonResponse(
        {"status": "ok" if report.ok else "unavailable", "checks": report.checks, **extra},
        status=200 if report.ok else 503,
    )


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker answer and writes get space, 503 (saying which
    does not) otherwise, within ``HEALTH_DB_TIMEOUT_S`` per database step. ``clusters`` says
    how many ``qcluster``s are alive; ``/health/queue/`` answers 503 when none is.

    Polled every few seconds, it also keeps the queue's signing canary current (at most once
    a minute): after a legitimate SECRET_KEY change, clusters with the new key can start as
    soon as the site runs, before any run is queued."""
    with short_database_timeouts():
        report = site_health()
        # Reported, not failed on: leases are timed by the database's clock. Read under the
        # same short timeouts, and only from a database that just answered.
        skews = _clock_skews() if report.ok else None
    if report.ok:
        queue_canary_write()
    return _answer(report, clusters=clusters_state(), worker_clock_skew_s=skews)


@never_cache
@require_GET
def health_queue(request: HttpRequest) -> JsonResponse:
    """Readiness of the queue for an alert or a load balancer: 503 when the broker does not
    answer, no ``qcluster`` is alive, or the live ones read tasks with another key."""
    report = queue_health()
    if report.checks["broker"] == "ok" and report.checks["clusters"].startswith("ok "):
        problem = queue_key_problem()
        report.checks["signing_key"] = "ok" if problem is None else f"mismatch: {problem}"
    return _answer(report)


def _clock_skews() -> dict[str, float] | None:
    try:
        return {host: round(s, 3) for host, s in worker_clock_skews().items()}
    except DatabaseError:  # the database check above says so
        return None


def _may_scrape(request: HttpRequest) -> bool:
    # The token first: it needs no database (the staff login reads the session).
    token = str(getattr(settings, "METRICS_TOKEN", "") or "")
    given = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_staff)


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus figures; 503 (JSON) within ``HEALTH_DB_TIMEOUT_S`` per database step when
    the database does not answer, never a hang or an HTML error page."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from prometheus_client.registry import CollectorRegistry

    try:
        with short_database_timeouts():
            if not _may_scrape(request):
                return HttpResponse(
                    "Metrics need a staff login or 'Authorization: Bearer <METRICS_TOKEN>'.\n",
                    status=403,
                    content_type="text/plain",
                )
            figures = site_metrics()
    except DatabaseError as exc:
        logger.warning("metrics: the database does not answer: %s", exc)
        return JsonResponse(
            {
                "status": "unavailable",
                "checks": {"database": f"unreachable ({type(exc).__name__})"},
            },
            status=503,
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(figures))
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


class _Collector:
    """One scrape's figures as Prometheus metric families."""

    def __init__(self, m: Metrics) -> None:
        self.m = m

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        m = self.m
        runs = GaugeMetricFamily(
            "evalplatform_runs", "Evaluation runs by state", labels=["benchmark", "state"]
        )
        for (benchmark, state), n in sorted(m.runs.items()):
            runs.add_metric([benchmark, state], n)
        yield runs
        yield GaugeMetricFamily(
            "evalplatform_runs_stuck",
            "Active runs with no progress or lease renewal for RUN_STUCK_AFTER_S",
            value=m.runs_stuck,
        )
        pieces = GaugeMetricFamily(
            "evalplatform_run_pieces",
            "Run pieces by state (cancelled: ended by their run's cancel, not failed)",
            labels=["state"],
        )
        for state, n in sorted(m.pieces.items()):
            pieces.add_metric([state], n)
        yield pieces
        yield CounterMetricFamily(
            "evalplatform_run_pieces_requeued",
            "Times pieces were handed out again after a lost worker, task or connection",
            value=m.pieces_requeued,
        )
        if m.queue_depth is not None:
            yield GaugeMetricFamily(
                "evalplatform_queue_depth", "Tasks waiting in the broker", value=m.queue_depth
            )
        skew = GaugeMetricFamily(
            "evalplatform_worker_clock_skew_seconds",
            "The database's clock minus a worker host's, measured at start and on each sweep",
            labels=["host"],
        )
        for host, seconds in sorted(m.clock_skew_s.items()):
            skew.add_metric([host], seconds)
        yield skew
        if m.clusters_alive is not None:
            yield GaugeMetricFamily(
                "evalplatform_qclusters_alive",
                "qcluster processes reporting to the broker",
                value=m.clusters_alive,
            )
        yield GaugeMetricFamily(
            "evalplatform_run_pieces_parked_on_write_failure",
            "Pieces parked because a write found no space (a full disk); see /health/",
            value=m.pieces_parked_on_write_failure,
        )
        calls = CounterMetricFamily(
            "evalplatform_judge_calls", "Judge calls in the ledger by outcome", labels=["outcome"]
        )
        for outcome, n in sorted(m.judge_calls.items()):
            calls.add_metric([outcome], n)
        yield calls
        latency = HistogramMetricFamily(
            "evalplatform_judge_call_latency_seconds",
            "Latency of answered judge calls (cache hits excluded)",
        )
        buckets = [(repr(bound), n) for bound, n in m.latency_buckets]
        latency.add_metric([], [*buckets, ("+Inf", m.latency_count)], m.latency_sum_s)
        yield latency
