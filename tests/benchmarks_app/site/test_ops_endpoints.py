"""``/health/`` answers 200 with the database and broker up and 503 naming what is down;
``/metrics`` (staff or token only) counts runs by state, re-queues, judge calls by outcome and
their latency, in Prometheus' text format."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from benchmarks_app.models import EvaluationRun, JudgeCall, PieceStatus, RunPiece, RunStatus
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db


def test_health_is_200_with_the_database_and_broker_up(client: Client) -> None:
    response = client.get("/health/")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}


def test_health_is_503_naming_the_database_when_it_does_not_answer(client: Client) -> None:
    def refused(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        raise OperationalError('connection to server at "127.0.0.1", port 5432 failed')

    with connection.execute_wrapper(refused):
        response = client.get("/health/")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "unreachable (OperationalError)"
    assert "5432" not in response.content.decode()  # no internals for whoever polls


def test_health_is_503_naming_the_broker_when_redis_does_not_answer(
    client: Client, monkeypatch: Any
) -> None:
    from django.conf import settings
    from django_q.conf import Conf

    # A Redis broker on a port where nothing listens (this helper's range).
    monkeypatch.setattr(Conf, "REDIS", "redis://127.0.0.1:9398/0")
    monkeypatch.setattr(Conf, "ORM", None)
    cluster = {**settings.Q_CLUSTER, "sync": False, "redis": "redis://127.0.0.1:9398/0"}
    with override_settings(Q_CLUSTER=cluster):
        response = client.get("/health/")
    assert response.status_code == 503
    assert response.json()["checks"] == {
        "database": "ok",
        "broker": "unreachable (ConnectionError)",
    }


def _scrape(client: Client, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_count_runs_by_state_requeues_and_judge_calls(client: Client) -> None:
    def run(status: str, benchmark: str = "probes") -> EvaluationRun:
        return EvaluationRun.objects.create(benchmark=benchmark, judge="j", status=status)

    run(RunStatus.FAILED)
    run(RunStatus.FAILED)
    waiting = run(RunStatus.WAITING)
    run(RunStatus.SUCCEEDED, "audit")
    stale = run(RunStatus.RUNNING, "checklist")
    EvaluationRun.objects.filter(pk=stale.pk).update(updated_at=timezone.now() - timedelta(hours=2))
    RunPiece.objects.create(run=waiting, key="a", status=PieceStatus.WAITING, requeues=2)
    RunPiece.objects.create(run=waiting, key="b", status=PieceStatus.QUEUED, requeues=1)
    for status, latency_ms in [("ok", 80), ("ok", 400), ("error", 3000), ("cached", 0)]:
        JudgeCall.objects.create(
            run=waiting, judge="j", prompt_hash="h" * 64, status=status, latency_ms=latency_ms
        )
    client.force_login(UserFactory.create(is_staff=True))
    m = _scrape(client)

    def runs(benchmark: str, state: str) -> float:
        return m[("evalplatform_runs", (("benchmark", benchmark), ("state", state)))]

    assert runs("probes", "failed") == 2 and runs("probes", "waiting") == 1
    assert runs("audit", "succeeded") == 1 and runs("checklist", "running") == 1
    assert runs("audit", "failed") == 0
    assert m[("evalplatform_runs_stuck", ())] == 1
    assert m[("evalplatform_run_pieces", (("state", "waiting"),))] == 1
    assert m[("evalplatform_run_pieces_requeued_total", ())] == 3
    assert m[("evalplatform_queue_depth", ())] == 0
    assert m[("evalplatform_judge_calls_total", (("outcome", "ok"),))] == 2
    assert m[("evalplatform_judge_calls_total", (("outcome", "cached"),))] == 1
    assert m[("evalplatform_judge_calls_total", (("outcome", "lost"),))] == 0
    # Latency of the three answered calls (the cache hit cost nothing and is left out).
    latency = "evalplatform_judge_call_latency_seconds"
    assert m[(f"{latency}_count", ())] == 3
    assert m[(f"{latency}_sum", ())] == pytest.approx(3.48)
    assert m[(f"{latency}_bucket", (("le", "0.1"),))] == 1
    assert m[(f"{latency}_bucket", (("le", "0.5"),))] == 2
    assert m[(f"{latency}_bucket", (("le", "+Inf"),))] == 3


def test_metrics_are_for_staff_or_the_token_only(client: Client) -> None:
    assert client.get("/metrics").status_code == 403
    client.force_login(UserFactory.create(is_staff=False))
    assert client.get("/metrics").status_code == 403
    client.logout()
    with override_settings(METRICS_TOKEN="s3cret-scrape-token"):
        refused = client.get("/metrics", headers={"Authorization": "Bearer wrong"})
        assert refused.status_code == 403
        m = _scrape(client, Authorization="Bearer s3cret-scrape-token")
    assert ("evalplatform_runs_stuck", ()) in m
    with override_settings(METRICS_TOKEN=""):
        # No token configured: a bare "Bearer " is no token.
        assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 403
