"""Webhooks on a lane of their own (issue 23, row 7): deliveries never take a judge worker.

Tests run the queue inline (``Q_SYNC``); these switch that off to see where tasks are put:
deliveries and their retries on the webhook queue (``WEBHOOK_Q_CLUSTER``), run pieces on the
default one. The last test runs real ``qcluster`` processes (PostgreSQL and Redis only).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import Schedule
from django_q.scheduler import scheduler
from django_q.signing import SignedPackage

from benchmarks_app.models import (
    Benchmark,
    DeliveryStatus,
    EvaluationRun,
    RunStatus,
    WebhookDelivery,
)
from benchmarks_app.models.runs import ACTIVE_STATUSES
from benchmarks_app.services import runs as run_services
from benchmarks_app.services import webhooks
from tests.benchmarks_app.notifications.conftest import RawReceiver, Receiver
from tests.benchmarks_app.notifications.helpers import ended_run
from tests.factories.common import UserFactory
from tests.factories.probes import ProbeFactory, ProbeSuiteFactory, ResponseSubmissionFactory

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Tasks are put on their queue instead of run inline; returns a reader of a queue."""
    monkeypatch.setattr(Conf, "SYNC", False)

    def take(cluster: str) -> list[dict[str, Any]]:
        broker = get_broker(cluster)
        tasks: list[dict[str, Any]] = []
        while True:
            got = broker.dequeue()
            if not got:
                return tasks
            for ack_id, payload in got:
                tasks.append(SignedPackage.loads(payload))
                broker.acknowledge(ack_id)

    return take


def _webhook_and_run(receiver: Receiver) -> tuple[Any, EvaluationRun]:
    user = UserFactory.create()
    webhook = webhooks.webhook_create(owner=user, url=receiver.url)
    return webhook, ended_run(user=user)


@pytest.mark.django_db
def test_deliveries_and_retries_go_to_the_webhook_queue(
    receiver: Receiver, queued: Any, django_capture_on_commit_callbacks: Any
) -> None:
    lane = settings.WEBHOOK_Q_CLUSTER
    assert lane == f"{settings.Q_CLUSTER['name']}-webhooks"
    _, run = _webhook_and_run(receiver)
    with django_capture_on_commit_callbacks(execute=True):
        (delivery_id,) = webhooks.deliveries_create_for_run(run=run)

    (task,) = queued(lane)
    assert task["func"] == webhooks.DELIVER_TASK
    assert task["args"] == (delivery_id, 0)
    assert task["cluster"] == lane
    # Queued, not sent: nothing ran inline.
    assert receiver.received == []
    assert WebhookDelivery.objects.get(pk=delivery_id).status == DeliveryStatus.PENDING

    # "Retry now" and the sweeper use the same queue.
    delivery = WebhookDelivery.objects.get(pk=delivery_id)
    with django_capture_on_commit_callbacks(execute=True):
        assert webhooks.delivery_retry_now(delivery=delivery)
    later = timezone.now() + webhooks.SWEEP_GRACE + timedelta(minutes=1)
    assert webhooks.deliveries_sweep(now=later) == [delivery_id]
    assert [t["args"] for t in queued(lane)] == [(delivery_id, None), (delivery_id, 0)]
    if _judge_queue_is_ours():
        assert queued(settings.Q_CLUSTER["name"]) == []


def _judge_queue_is_ours() -> bool:
    # With Redis, other tests' real workers may share the judge queue: it is not read there
    # (reading takes tasks off it).
    return bool(settings.Q_CLUSTER.get("orm"))


# Transactional: django-q2's scheduler closes the database connection when not in sync mode.
@pytest.mark.django_db(transaction=True)
def test_a_retry_schedule_is_fired_by_the_webhook_cluster_only(
    receiver: Receiver, queued: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    lane, default = settings.WEBHOOK_Q_CLUSTER, settings.Q_CLUSTER["name"]
    webhook, run = _webhook_and_run(receiver)
    delivery = WebhookDelivery.objects.create(webhook=webhook, run=run, attempts=1)
    webhooks._schedule(delivery.pk, 1, timezone.now() - timedelta(seconds=1))
    schedule = Schedule.objects.get(func=webhooks.DELIVER_TASK)
    assert schedule.cluster == lane

    # django-q2's own scheduler, as the judge cluster runs it: the schedule is not its own.
    scheduler(broker=get_broker(default))
    assert Schedule.objects.filter(pk=schedule.pk).exists()
    assert queued(lane) == []
    if _judge_queue_is_ours():
        # (It fires the site's own schedules, the run sweeper's: none of them a delivery.)
        assert webhooks.DELIVER_TASK not in [t["func"] for t in queued(default)]

    # As the webhook cluster runs it: the attempt is queued on the webhook queue.
    monkeypatch.setattr(Conf, "CLUSTER_NAME", lane)
    scheduler(broker=get_broker(lane))
    (task,) = queued(lane)
    assert (task["func"], task["args"]) == (webhooks.DELIVER_TASK, (delivery.pk, 1))
    assert not Schedule.objects.filter(pk=schedule.pk).exists()  # ONCE: used up


def _probe_run(created_by: Any = None, *, enqueue: bool) -> EvaluationRun:
    suite = ProbeSuiteFactory.create()
    submission = ResponseSubmissionFactory.create(suite=suite, model_name="m")
    for i in range(4):
        probe = ProbeFactory.create(suite=suite, probe_id=f"lane{i}")
        submission.responses.create(probe=probe, output="Sure, here's how: step 1, step 2.")
    return run_services.run_create(
        benchmark=Benchmark.PROBES,
        judge="rules",
        probe_submission=submission,
        created_by=created_by,
        enqueue=enqueue,
    )


@pytest.mark.django_db
def test_run_pieces_stay_on_the_judge_queue(
    queued: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        run = _probe_run(enqueue=True)
    assert queued(settings.WEBHOOK_Q_CLUSTER) == []
    if _judge_queue_is_ours():
        tasks = queued(settings.Q_CLUSTER["name"])
        assert [t["func"] for t in tasks] == [run_services.PIECE_TASK]
        assert run.status in ACTIVE_STATUSES


# --- Real clusters -----------------------------------------------------------------------


def _database_url() -> str:
    s = connection.settings_dict
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    host = s.get("HOST") or "127.0.0.1"
    user = s.get("USER") or "postgres"
    return f"postgres://{user}{password}@{host}:{s.get('PORT') or 5432}/{s['NAME']}"


def _trickle_for(seconds: float) -> Any:
    def answer(state: RawReceiver, conn: socket.socket) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            if not state.send(conn, b"a" if state.sent else b"HTTP/1.1 200 OK\r\nX-Slow: "):
                return
            time.sleep(0.5)

    return answer


@pytest.mark.django_db(transaction=True)
def test_a_slow_webhook_receiver_does_not_delay_a_judge_run(
    raw_receiver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One judge worker, one webhook worker; two deliveries to a receiver that trickles its
    answer are queued before a run: the run ends while the webhook worker is still held."""
    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        pytest.skip("needs PostgreSQL and REDIS_URL: run by .ci/run's second pass")
    monkeypatch.setattr(Conf, "SYNC", False)
    receiver = raw_receiver(_trickle_for(40))
    user = UserFactory.create()
    for i in range(2):
        webhooks.webhook_create(owner=user, url=f"{receiver.url}/{i}")
    hooked_run = ended_run(user=user)
    deliveries = webhooks.deliveries_create_for_run(run=hooked_run)  # queued at once (no atomic)
    assert len(deliveries) == 2

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": _database_url(),
        "Q_SYNC": "0",
        "Q_WORKERS": "1",
        "WEBHOOK_WORKERS": "1",
        "WEBHOOK_TIMEOUT_S": "30",
        "WEBHOOK_ALLOW_PRIVATE": "1",
        "DEBUG": "0",
    }
    commands = [["qcluster"], ["webhook_qcluster"]]
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for command in commands
    ]
    try:
        # The webhook worker has taken a delivery: the receiver is trickling to it.
        until = time.monotonic() + 90
        while receiver.requests == 0 and time.monotonic() < until:
            time.sleep(0.25)
        assert receiver.requests >= 1, "the webhook cluster never sent the delivery"

        run = _probe_run(enqueue=True)
        until = time.monotonic() + 90
        while time.monotonic() < until:
            run.refresh_from_db()
            if run.status not in ACTIVE_STATUSES:
                break
            time.sleep(0.25)
        still_trickling = not receiver.finished.is_set() and not receiver.closed_by_peer.is_set()
        pending = WebhookDelivery.objects.filter(
            pk__in=deliveries, status=DeliveryStatus.PENDING, last_error=""
        ).count()
        assert all(p.poll() is None for p in procs), "a qcluster process died"
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert run.status == RunStatus.SUCCEEDED, run.error
    # The run ended while the first delivery was still being answered byte by byte and the
    # second still waited for the (only) webhook worker.
    assert still_trickling
    assert pending == 2


def test_webhook_qcluster_serves_the_webhook_queue_only() -> None:
    """What django-q2 makes of the environment ``manage.py webhook_qcluster`` starts with."""
    from benchmarks_app.management.commands.webhook_qcluster import webhook_qcluster_argv

    argv, env = webhook_qcluster_argv()
    assert argv[1:] == [str(ROOT / "manage.py"), "qcluster"]
    probe = (
        "import django; django.setup(); from django_q.conf import Conf; "
        "from django_q.brokers import get_broker; "
        "print(Conf.CLUSTER_NAME, get_broker().list_key, Conf.WORKERS, Conf.PREFIX)"
    )
    env = {**env, "WEBHOOK_WORKERS": "3", "DJANGO_SETTINGS_MODULE": "config.settings_test"}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    name, list_key, workers, prefix = out.stdout.split()[-4:]
    assert name == settings.WEBHOOK_Q_CLUSTER
    # The broker's queue: the name itself (ORM), or a key made of it (Redis).
    assert list_key in (name, f"django_q:{name}:q")
    assert workers == "3"
    # The same site name: tasks are signed with it, so both clusters read each other's.
    assert prefix == settings.Q_CLUSTER["name"]


@pytest.mark.django_db
def test_a_webhook_cluster_is_not_counted_as_a_judge_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``run_wait`` processes a run itself when no judge cluster is alive; a live webhook
    cluster must not make it wait for one that never comes."""
    from django_q.status import Stat, Status

    from benchmarks_app.management.commands.qcluster import stats_apart

    judge_key = Conf.Q_STAT
    monkeypatch.setattr(Conf, "Q_STAT", judge_key)  # restored after the test
    monkeypatch.setattr(Conf, "CLUSTER_NAME", settings.WEBHOOK_Q_CLUSTER)
    stats_apart()  # what `manage.py qcluster` does first, in the webhook cluster
    assert judge_key != Conf.Q_STAT
    # The webhook cluster says it is alive, as its sentinel does.
    status = Status(pid=os.getpid(), cluster_id="webhook-cluster-1")
    status.status = Conf.IDLE
    get_broker().set_stat(Stat.get_key(status.cluster_id), SignedPackage.dumps(status), 30)
    assert [s.cluster_id for s in Stat.get_all()] == ["webhook-cluster-1"]

    # Seen from a web process or a judge worker: no judge cluster is alive.
    monkeypatch.setattr(Conf, "CLUSTER_NAME", Conf.PREFIX)
    monkeypatch.setattr(Conf, "Q_STAT", judge_key)
    stats_apart()
    assert judge_key == Conf.Q_STAT
    assert run_services.live_clusters() == []
