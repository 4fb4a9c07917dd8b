"""``/health/`` answers 200 with the database and broker up and 503 naming what is down;
``/metrics`` (staff or token only) counts runs by state, re-queues, judge calls by outcome and
their latency, in Prometheus' text format."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from benchmarks_app.models import EvaluationRun, JudgeCall, PieceStatus, RunPiece, RunStatus
from benchmarks_app.models.runs import WRITE_FAILURE_PREFIX
from tests.factories.common import UserFactory

pytestmark = pytest.mark.django_db
SCRAPER = {"Authorization": "Bearer s3cret-scrape-token"}


def test_health_is_200_with_the_database_and_broker_up(client: Client) -> None:
    response = client.get("/health/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"] == {"database": "ok", "broker": "ok", "storage": "ok"}
    assert body["clusters"].startswith("ok (synchronous queue")
    assert body["worker_clock_skew_s"] == {}


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
        "storage": "ok",
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
    assert m[("evalplatform_judge_calls_total", (("outcome", "interrupted"),))] == 0
    assert m[("evalplatform_run_pieces_parked_on_write_failure", ())] == 0
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


def test_a_piece_parked_on_a_full_disk_makes_health_503_and_shows_in_metrics(
    client: Client,
) -> None:
    run = EvaluationRun.objects.create(benchmark="probes", judge="j", status=RunStatus.WAITING)
    cause = "the database cannot write (OperationalError: database or disk is full)"
    RunPiece.objects.create(
        run=run, key="", status=PieceStatus.WAITING, error=f"{WRITE_FAILURE_PREFIX}{cause}"
    )
    JudgeCall.objects.create(run=run, judge="j", prompt_hash="h" * 64, status="interrupted")
    response = client.get("/health/")
    assert response.status_code == 503
    storage = response.json()["checks"]["storage"]
    assert storage.startswith("failing: 1 piece(s) parked") and "disk is full" in storage
    client.force_login(UserFactory.create(is_staff=True))
    m = _scrape(client)
    assert m[("evalplatform_run_pieces_parked_on_write_failure", ())] == 1
    assert m[("evalplatform_judge_calls_total", (("outcome", "interrupted"),))] == 1
    # The interrupted call was not answered: no latency to count.
    assert m[("evalplatform_judge_call_latency_seconds_count", ())] == 0


def test_health_queue_is_503_when_no_cluster_is_alive(client: Client) -> None:
    from django.conf import settings

    assert client.get("/health/queue/").status_code == 200  # the synchronous queue
    cluster = {**settings.Q_CLUSTER, "sync": False}
    with override_settings(Q_CLUSTER=cluster):
        response = client.get("/health/queue/")
        health = client.get("/health/").json()
    assert response.status_code == 503
    assert response.json()["checks"] == {"broker": "ok", "clusters": "none alive"}
    # The site itself is up: /health/ says so, and names the missing workers.
    assert health["status"] == "ok" and health["clusters"] == "none alive"


def test_metrics_is_503_json_when_the_database_refuses(client: Client) -> None:
    def refused(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        raise OperationalError('connection to server at "127.0.0.1", port 5432 failed')

    with (
        override_settings(METRICS_TOKEN="s3cret-scrape-token"),
        connection.execute_wrapper(refused),
    ):
        response = client.get("/metrics", headers=SCRAPER)
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "unreachable (OperationalError)"},
    }


@contextmanager
def _black_hole() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (a server behind a black hole)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for sock in held:
            sock.close()
        server.close()


@pytest.mark.django_db(transaction=True)
def test_health_and_metrics_answer_503_quickly_with_postgresql_black_holed(
    client: Client,
) -> None:
    """Issue 40: the connection a probe uses gives up within HEALTH_DB_TIMEOUT_S."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): libpq's connect timeout is what is tested")
    saved = connection.settings_dict
    with _black_hole() as port, override_settings(METRICS_TOKEN="s3cret-scrape-token"):
        connection.close()
        connection.settings_dict = {**saved, "HOST": "127.0.0.1", "PORT": str(port)}
        try:
            started = time.monotonic()
            health = client.get("/health/")
            metrics = client.get("/metrics", headers=SCRAPER)
            took = time.monotonic() - started
        finally:
            connection.close()
            connection.settings_dict = saved
    assert health.status_code == 503 and health.json()["checks"]["database"].startswith(
        "unreachable"
    )
    assert metrics.status_code == 503 and metrics.json()["status"] == "unavailable"
    assert took < 8, took  # two requests, each given up after about 2 s


def test_a_workers_clock_skew_is_shown_in_health_metrics_and_the_admin(
    client: Client, monkeypatch: Any
) -> None:
    """Measured against the database when a worker starts and on each sweep (here a sweep on
    a host whose clock runs 120 s behind); reported, not failed on."""
    from benchmarks_app.models import WorkerClock
    from benchmarks_app.services.sweeper import runs_sweep

    real = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real() - timedelta(seconds=120))
    runs_sweep()
    monkeypatch.setattr(timezone, "now", real)
    (clock,) = WorkerClock.objects.all()
    assert 119 < clock.skew_s < 121
    response = client.get("/health/")
    assert response.status_code == 200
    assert 119 < response.json()["worker_clock_skew_s"][clock.host] < 121
    staff = UserFactory.create(is_staff=True, is_superuser=True)
    client.force_login(staff)
    families = {
        f.name: f for f in text_string_to_metric_families(client.get("/metrics").content.decode())
    }
    (sample,) = families["evalplatform_worker_clock_skew_seconds"].samples
    assert sample.labels == {"host": clock.host} and 119 < sample.value < 121
    page = client.get("/admin/benchmarks_app/workerclock/").content.decode()
    assert clock.host in page and "Skew s" in page


def test_metrics_count_the_pieces_a_cancel_ended_as_cancelled(client: Client) -> None:
    """A cancel ends a run's pieces; /metrics says cancelled, not failed (issue 37 item 5)."""
    from benchmarks_app.services.runs import run_cancel

    cancelled = EvaluationRun.objects.create(benchmark="probes", judge="j", status="queued")
    for key in ("a", "b", "c"):
        RunPiece.objects.create(run=cancelled, key=key, status=PieceStatus.QUEUED)
    broken = EvaluationRun.objects.create(benchmark="probes", judge="j", status="failed")
    RunPiece.objects.create(run=broken, key="x", status=PieceStatus.FAILED, error="boom")
    assert run_cancel(run=cancelled).status == RunStatus.CANCELLED
    client.force_login(UserFactory.create(is_staff=True))
    m = _scrape(client)

    def pieces(state: str) -> float:
        return m[("evalplatform_run_pieces", (("state", state),))]

    assert pieces("cancelled") == 3 and pieces("failed") == 1
    assert m[("evalplatform_runs", (("benchmark", "probes"), ("state", "cancelled")))] == 1
    assert m[("evalplatform_runs", (("benchmark", "probes"), ("state", "failed")))] == 1
