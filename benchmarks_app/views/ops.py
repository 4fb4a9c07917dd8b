"""What operators poll from outside: ``/health/`` for a load balancer or Kubernetes probe,
``/metrics`` for Prometheus (staff, or ``Authorization: Bearer <METRICS_TOKEN>``)."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from benchmarks_app.selectors.health import site_health
from benchmarks_app.selectors.metrics import Metrics, site_metrics
from benchmarks_app.services.queue_canary import queue_canary_write


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """200 when the database and the broker answer, 503 (saying which does not) otherwise.

    Polled every few seconds, it also keeps the queue's signing canary current (at most once
    a minute): after a legitimate SECRET_KEY change, clusters with the new key can start as
    soon as the site runs, before any run is queued."""
    report = site_health()
    if report.ok:
        queue_canary_write()
    return JsonResponse(
        {"status": "ok" if report.ok else "unavailable", "checks": report.checks},
        status=200 if report.ok else 503,
    )


def _may_scrape(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_staff:
        return True
    token = str(getattr(settings, "METRICS_TOKEN", "") or "")
    given = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from prometheus_client.registry import CollectorRegistry

    if not _may_scrape(request):
        return HttpResponse(
            "Metrics need a staff login or 'Authorization: Bearer <METRICS_TOKEN>'.\n",
            status=403,
            content_type="text/plain",
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(site_metrics()))
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
            "evalplatform_run_pieces", "Run pieces by state", labels=["state"]
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
        if m.clusters_alive is not None:
            yield GaugeMetricFamily(
                "evalplatform_qclusters_alive",
                "qcluster processes reporting to the broker",
                value=m.clusters_alive,
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
