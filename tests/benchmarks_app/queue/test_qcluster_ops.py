"""What operators see of ``qcluster`` from outside: a cluster with another ``SECRET_KEY``
refuses to start in one line instead of swallowing tasks, the sweeper goes on while every
worker slot is busy, and the liveness probe tells a live cluster from a dead one.

The in-process tests run on any database; those with real ``qcluster`` processes need
PostgreSQL + Redis (the second pass of .ci/run), as the other cluster tests do.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from benchmarks_app.models import EvaluationRun, PieceStatus, RunPiece, RunStatus
from benchmarks_app.services import queue_canary
from benchmarks_app.services.liveness import liveness_problem

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def canary() -> Iterator[None]:
    queue_canary.queue_canary_write(force=True)
    yield
    queue_canary._state["cluster"] = False
    queue_canary._state["written_at"] = -queue_canary.REWRITE_EVERY_S


OTHER_KEY = "another-key-entirely-" + "x" * 40


@pytest.fixture
def other_key(monkeypatch: Any) -> Any:
    """Switch this process to another SECRET_KEY (django-q2 reads it once, at import)."""
    from django_q.conf import Conf

    def switch() -> Any:
        monkeypatch.setattr(Conf, "SECRET_KEY", OTHER_KEY)
        # Redis keeps a canary across tests (the database's are rolled back): start this
        # test's other key with none signed, as the ORM broker does.
        _forget(queue_canary.canary_key())
        return override_settings(SECRET_KEY=OTHER_KEY)

    return switch


@pytest.mark.django_db
def test_the_canary_verifies_with_the_sites_key_and_not_with_another(
    canary: None, other_key: Any
) -> None:
    assert queue_canary.queue_canary_problem() is None
    with other_key():
        problem = queue_canary.queue_canary_problem()
    assert problem is not None and "SECRET_KEY differs" in problem
    assert "\n" not in problem and "Traceback" not in problem


@pytest.mark.django_db
def test_the_canary_is_not_taken_for_a_live_cluster(canary: None) -> None:
    """With no cluster running, nothing in the broker's stats passes for one: ``run_wait``
    must process the run itself instead of waiting for a worker that is not there, and
    django-q2's ``qinfo`` reads only clusters."""
    from django_q.status import Stat

    from benchmarks_app.selectors.run_health import live_clusters

    assert queue_canary.queue_canary_problem() is None  # the canary is there...
    assert live_clusters() == []  # ...and is no cluster
    assert all(hasattr(stat, "cluster_id") for stat in Stat.get_all())
    out = io.StringIO()
    call_command("qinfo", stdout=out)


@pytest.mark.django_db
def test_qcluster_with_another_key_refuses_to_start_in_one_line(
    canary: None, other_key: Any
) -> None:
    err = io.StringIO()
    with (
        other_key(),
        pytest.raises(SystemExit) as exited,
    ):
        call_command("qcluster", stderr=err)
    assert exited.value.code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("qcluster refuses to start:") and "SECRET_KEY" in lines[0]


def _forget(key: str) -> None:
    """Drop one canary record from wherever the broker keeps it."""
    from django_q.brokers import Broker, get_broker

    broker = get_broker()
    if type(broker).set_stat is Broker.set_stat and getattr(broker, "cache", None) is not None:
        broker.cache.delete(key)
    else:
        broker.connection.delete(key)


@pytest.mark.django_db
def test_a_shell_with_another_key_cannot_poison_the_canary_of_the_good_clusters(
    canary: None, other_key: Any, monkeypatch: Any
) -> None:
    """`evaluate_audit` from a shell with another key writes last: the site's clusters still
    verify their own canary, while a cluster started with the shell's key would not be
    trusted by the site's (and one with a third key is refused)."""
    from django_q.conf import Conf

    site_key = Conf.SECRET_KEY
    with other_key():
        assert queue_canary.queue_canary_write(force=True)  # no live cluster to compare with
    monkeypatch.setattr(Conf, "SECRET_KEY", site_key)
    with override_settings(SECRET_KEY=site_key):
        assert queue_canary.queue_canary_check().state == "ok"
        assert queue_canary.queue_canary_problem() is None
    monkeypatch.setattr(Conf, "SECRET_KEY", "a-third-key-" + "y" * 40)
    with override_settings(SECRET_KEY="a-third-key-" + "y" * 40):
        assert queue_canary.queue_canary_check().state == "wrong_key"


@pytest.mark.django_db
def test_a_writer_whose_key_no_live_cluster_shares_refuses_to_queue_and_sign(
    canary: None, other_key: Any, monkeypatch: Any
) -> None:
    from django.conf import settings
    from django_q.conf import Conf

    site_key = Conf.SECRET_KEY
    queued = {**settings.Q_CLUSTER, "sync": False}
    with override_settings(Q_CLUSTER=queued):
        assert queue_canary.queue_key_problem() is None  # no live cluster: cannot tell
        queue_canary.queue_cluster_key_publish()  # a good cluster says it is alive
        assert queue_canary.queue_key_problem() is None
        with other_key():
            problem = queue_canary.queue_key_problem()
            assert problem is not None and "differs from that of the running" in problem
            assert queue_canary.queue_canary_write(force=True) is False  # signs nothing
            with pytest.raises(CommandError, match="refusing to queue a run"):
                call_command("evaluate_audit", "--scanner", "any")
        monkeypatch.setattr(Conf, "SECRET_KEY", site_key)
        # The shell left no trace: the site's clusters still verify their own canary.
        assert queue_canary.queue_canary_check().state == "ok"


@pytest.mark.django_db
def test_an_unreachable_broker_is_not_a_wrong_key(canary: None, monkeypatch: Any) -> None:
    """A Redis that refuses connections (a real client against a closed port) reads as
    ``unreachable``: the cluster waits for it instead of exiting as for a wrong key."""
    import django_q.brokers
    from django_q.brokers.redis_broker import Redis
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "REDIS", "redis://127.0.0.1:9/0")
    monkeypatch.setattr(Conf, "DJANGO_REDIS", None)
    monkeypatch.setattr(django_q.brokers, "get_broker", lambda list_key=None: Redis())
    check = queue_canary.queue_canary_check()
    assert check.state == "unreachable" and "cannot be read" in check.detail
    assert queue_canary.queue_canary_problem() is None
    from benchmarks_app.management.commands import qcluster

    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:  # the broker comes back after three waits
            monkeypatch.undo()

    monkeypatch.setattr(qcluster.time, "sleep", sleep)
    assert qcluster.canary_wait_for_broker().state in ("ok", "unknown")
    assert sleeps == [1.0, 2.0, 4.0]


@pytest.mark.django_db
def test_a_cluster_never_rewrites_the_canary_with_its_own_key(
    canary: None, other_key: Any, monkeypatch: Any
) -> None:
    from django_q.conf import Conf

    site_key = Conf.SECRET_KEY
    queue_canary.mark_cluster_process()
    with other_key():
        queue_canary.queue_canary_write(force=True)  # a wrong cluster's sweeper sending pieces
        assert queue_canary.queue_canary_problem() is not None
    monkeypatch.setattr(Conf, "SECRET_KEY", site_key)
    assert queue_canary.queue_canary_problem() is None


@pytest.mark.django_db
def test_after_a_key_change_the_sites_health_poll_renews_the_canary(
    canary: None, other_key: Any, monkeypatch: Any, client: Any
) -> None:
    from django_q.conf import Conf

    site_key = Conf.SECRET_KEY
    _forget(queue_canary.canary_key())  # the new key has signed nothing yet
    with other_key():
        queue_canary.queue_canary_write(force=True)  # signed before the key changed
    monkeypatch.setattr(Conf, "SECRET_KEY", site_key)
    assert queue_canary.queue_canary_problem() is not None
    queue_canary._state["written_at"] = -queue_canary.REWRITE_EVERY_S
    assert client.get("/health/").status_code == 200
    # A cluster with the site's (new) key can start now.
    assert queue_canary.queue_canary_problem() is None


def test_the_liveness_probe_tells_a_fresh_file_from_a_stale_or_missing_one(
    tmp_path: Path,
) -> None:
    alive = tmp_path / "qcluster.alive"
    assert "missing" in (liveness_problem(path=alive) or "")
    alive.touch()
    assert liveness_problem(path=alive) is None
    old = time.time() - 120
    os.utime(alive, (old, old))
    assert "stopped" in (liveness_problem(path=alive, max_age_s=30) or "")
    with override_settings(Q_LIVENESS_FILE=str(alive)), pytest.raises(CommandError) as failed:
        call_command("qcluster_alive")
    assert "qcluster is not alive" in str(failed.value)


def _database_url() -> str:
    s = connection.settings_dict
    user = s.get("USER") or "postgres"
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    host = s.get("HOST") or "127.0.0.1"
    return f"postgres://{user}{password}@{host}:{s.get('PORT') or 5432}/{s['NAME']}"


def _cluster_env(tmp_path: Path, monkeypatch: Any, **extra: str) -> dict[str, str]:
    """The environment of a cluster on a queue of its own (its own ``Q_NAME``: other cluster
    tests may run beside this one on the same Redis); this process queues there too."""
    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        pytest.skip("needs PostgreSQL and REDIS_URL: run by .ci/run's second pass")
    from django_q.conf import Conf

    tag = f"ops-test-{uuid.uuid4().hex[:10]}"
    monkeypatch.setattr(Conf, "PREFIX", tag)
    monkeypatch.setattr(Conf, "CLUSTER_NAME", tag)
    return {
        **os.environ,
        "Q_NAME": tag,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": _database_url(),
        "Q_SYNC": "0",
        "DEBUG": "0",
        "Q_LIVENESS_FILE": str(tmp_path / "qcluster.alive"),
        **extra,
    }


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_real_cluster_with_another_key_exits_and_leaves_the_task_in_the_queue(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from django_q.brokers import get_broker
    from django_q.tasks import async_task

    env = _cluster_env(tmp_path, monkeypatch, SECRET_KEY=OTHER_KEY)
    queue_canary.queue_canary_write(force=True)
    broker = get_broker()
    broker.purge_queue()
    async_task("math.floor", 1.5, sync=False)
    proc = subprocess.run(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    # One line says why (other lines are other apps' start-up INFO), and no traceback.
    said = [line for line in proc.stderr.splitlines() if "qcluster refuses to start" in line]
    assert len(said) == 1 and "SECRET_KEY" in said[0], proc.stderr
    assert "Traceback" not in proc.stderr and "BadSignature" not in proc.stderr
    assert broker.queue_size() == 1  # not taken and dropped
    broker.purge_queue()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_sweeper_runs_while_every_worker_slot_is_busy(tmp_path: Path, monkeypatch: Any) -> None:
    from django_q.brokers import get_broker
    from django_q.tasks import async_task

    env = _cluster_env(tmp_path, monkeypatch, Q_WORKERS="1", RUN_SWEEP_S="1", RUN_LEASE_S="600")
    get_broker().purge_queue()
    queue_canary.queue_canary_write(force=True)
    run = EvaluationRun.objects.create(benchmark="probes", judge="rules", status="running")
    piece = RunPiece.objects.create(
        run=run,
        status=PieceStatus.RUNNING,
        attempt=1,
        worker="dead-host:1/2",
        lease_expires_at=timezone.now() - timedelta(seconds=5),
    )
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # The only worker slot sleeps: no sweep task could run in it.
        async_task("time.sleep", 60, sync=False)
        deadline = time.monotonic() + 45
        swept = False
        while time.monotonic() < deadline and not swept:
            time.sleep(0.5)
            piece.refresh_from_db()
            swept = piece.requeues >= 1
        assert swept, "no sweep while the worker slot was busy"
        assert "lease of attempt 1 expired" in piece.error or piece.status != "running"
        alive = subprocess.run(
            [sys.executable, "manage.py", "qcluster_alive"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert alive.returncode == 0, alive.stderr
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        get_broker().purge_queue()
    time.sleep(1.5)
    dead = subprocess.run(
        [sys.executable, "manage.py", "qcluster_alive", "--max-age", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dead.returncode == 1 and "not alive" in dead.stderr
    run.refresh_from_db()
    assert run.status in (RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.FAILED)


@pytest.mark.django_db
def test_a_stop_before_the_sentinel_exists_is_a_quiet_no_op() -> None:
    """A SIGTERM between the handler's installation and ``cluster.start()`` (``make demo``
    stopped as it starts) found no sentinel: django-q2's ``Cluster.stop`` raised on ``None``
    and the cluster printed a traceback on its way out."""
    from django_q.cluster import Cluster

    from benchmarks_app.management.commands.qcluster import stop_cluster

    cluster = Cluster()
    assert cluster.sentinel is None
    with pytest.raises(AttributeError):
        cluster.stop()  # what the handler called before
    assert stop_cluster(cluster) is False
