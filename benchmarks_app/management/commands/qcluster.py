"""``qcluster`` that stops within seconds on SIGTERM, however it is sent.

django-q2's own command asks its sentinel to stop and waits for it; when a service manager
signals the whole process group, the sentinel and workers are already gone and the master is
left waiting (over a minute, seen). This command gives the cluster ``Q_STOP_GRACE_S`` seconds
(default 5) to stop cleanly, then kills what is left of it and exits. The pieces its workers
were holding have their leases expired on the way out, so the sweeper hands them to another
worker at its next pass instead of waiting for the leases to run out.

It also refuses to start (one line, exit status 2) when its ``SECRET_KEY`` cannot verify the
queue's signing canary (:mod:`benchmarks_app.services.queue_canary`), and stops when that
happens later; a broker it cannot reach is not that: it waits (backing off up to
``CANARY_BACKOFF_MAX_S``), says so in its log, and carries on once the broker answers. It runs
the sweeper every ``RUN_SWEEP_S`` in a thread of this process, outside the
worker pool, so recovery never waits for a free worker slot; and touches ``Q_LIVENESS_FILE``
while its sentinel lives, for ``manage.py qcluster_alive``.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models.functions import Now
from django_q.cluster import Cluster
from django_q.conf import Conf
from django_q.management.commands.qcluster import Command as QClusterCommand

from benchmarks_app.checks import connection_budget_warnings
from benchmarks_app.cpu_priority import cpu_priority_lower
from benchmarks_app.services.liveness import liveness_file
from benchmarks_app.services.queue_canary import (
    CanaryCheck,
    mark_cluster_process,
    queue_canary_check,
    queue_cluster_key_publish,
)
from benchmarks_app.services.scheduling import process_warm_up

logger = logging.getLogger("benchmarks_app.qcluster")


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc; direct children elsewhere)."""
    parents: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return [p.pid for p in multiprocessing.active_children() if p.pid]
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _release_leases(sentinel_pid: int | None) -> None:
    """Expire the leases this cluster's workers hold, so their pieces move on at once."""
    if sentinel_pid is None:
        return
    from benchmarks_app.models import PieceStatus, RunPiece

    with contextlib.suppress(Exception):
        released = RunPiece.objects.filter(
            status=PieceStatus.RUNNING,
            worker__startswith=f"{socket.gethostname()}:{sentinel_pid}/",
        ).update(lease_expires_at=Now())  # the database's clock, which claims read
        if released:
            logger.warning("released %s piece lease(s) held by this cluster", released)


def stats_apart() -> None:
    """A cluster serving another queue than the judge one (``webhook_qcluster``) publishes
    that it is alive under a key of its own.

    ``live_clusters`` (``run_wait``: watch a run when a worker is alive, else process it
    here) must not count a webhook cluster as a judge worker. django-q2 keeps every cluster
    of a site under one key, and the site name cannot differ (tasks are signed with it).
    """
    if Conf.CLUSTER_NAME != Conf.PREFIX:
        Conf.Q_STAT = f"django_q:{Conf.PREFIX}:{Conf.CLUSTER_NAME}:cluster"


# How often a running cluster checks that it can still read the queue's tasks.
CANARY_CHECK_S = 30.0
# Waits between tries while the broker cannot be reached: 1, 2, 4 ... up to this (seconds).
CANARY_BACKOFF_MAX_S = 30.0


def _canary_check_closing() -> CanaryCheck:
    """Check the canary, then publish this cluster's key fingerprint unless it is refused
    (a wrong key must not pass for one a live cluster reads with)."""
    try:
        check = queue_canary_check()
        if check.state in ("ok", "unknown"):
            try:
                queue_cluster_key_publish()
            except Exception as exc:
                return CanaryCheck(
                    "unreachable", f"the broker cannot be written ({type(exc).__name__}: {exc})"
                )
        return check
    finally:
        connections.close_all()


def canary_wait_for_broker(*, stopping: threading.Event | None = None) -> CanaryCheck:
    """Check the canary until the broker answers, backing off; the answer that ended it."""
    delay = 1.0
    while True:
        check = _canary_check_closing()
        if check.state != "unreachable" or (stopping is not None and stopping.is_set()):
            return check
        logger.warning(
            "qcluster %s: %s; waiting %.0f s and trying again", os.getpid(), check.detail, delay
        )
        time.sleep(delay)
        delay = min(delay * 2, CANARY_BACKOFF_MAX_S)


class Sweeper(threading.Thread):
    """Runs the sweeper every ``RUN_SWEEP_S`` in the cluster's own process, not in a worker:
    when every worker waits on a down judge, lost pieces are still handed out again."""

    def __init__(self, stopping: threading.Event) -> None:
        super().__init__(name="run-sweeper", daemon=True)
        self.stopping = stopping
        self.every_s = float(getattr(settings, "RUN_SWEEP_S", 60))

    def run(self) -> None:
        from benchmarks_app.tasks.runs import sweep_runs

        while not self.stopping.wait(self.every_s):
            try:
                logger.info("sweep: %s", sweep_runs())
            except Exception:  # a database or broker blip: the next pass tries again
                logger.exception("the sweeper failed; trying again in %ss", self.every_s)
            finally:
                connections.close_all()


def stop_cluster(cluster: Cluster) -> bool:
    """Ask ``cluster``'s sentinel to stop and wait for it; False when there is none to stop.

    A SIGTERM can arrive while ``cluster.start()`` has not made its sentinel yet (a demo
    stopped as it starts): django-q2's ``Cluster.stop`` then fails on ``None``, and the
    process would print a traceback on its way out instead of one line.
    """
    sentinel = cluster.sentinel
    if sentinel is None or not sentinel.is_alive():
        return False
    return bool(cluster.stop())


class Command(QClusterCommand):
    help = "Starts a django-q2 cluster that stops within seconds on SIGTERM or SIGINT."

    def handle(self, *args: Any, **options: Any) -> None:
        settings.SECRET_KEY  # noqa: B018 - signing needs it; fail before starting
        mark_cluster_process()
        check = canary_wait_for_broker()
        if check.state == "wrong_key":
            self.stderr.write(f"qcluster refuses to start: {check.detail}")
            raise SystemExit(2)
        for warning in connection_budget_warnings():
            logger.warning("%s %s", warning.msg, warning.hint or "")
        # Before the workers fork: each starts with the judges' client library loaded and the
        # start-up heap frozen, instead of paying for both while its first run waits (and
        # this host's clock measured against the database's).
        process_warm_up()
        if settings.Q_NICE > 0:
            # Before the workers fork, so that they inherit it; the session's group too, where
            # the kernel shares the CPU between sessions first (benchmarks_app.cpu_priority).
            lowered = cpu_priority_lower(by=settings.Q_NICE)
            logger.info(
                "qcluster: niceness %s, session group %s",
                lowered.nice,
                lowered.session_group_nice if lowered.session_group_nice is not None else "-",
            )
        # Forked processes must not share this process's database connection.
        connections.close_all()
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        grace = float(os.environ.get("Q_STOP_GRACE_S", "5"))
        stats_apart()
        # Cluster() installs django-q2's own handlers, which fail on a sentinel not made yet:
        # a signal in that window waits until this command's handlers are in place.
        stop_signals = {signal.SIGTERM, signal.SIGINT}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
        cluster = Cluster()
        stopping = threading.Event()
        exit_code = {"value": 0}

        def stop(signum: int, frame: Any) -> None:
            if stopping.is_set():
                return
            stopping.set()
            sentinel = cluster.sentinel
            sentinel_pid = sentinel.pid if sentinel is not None else None
            logger.warning(
                "qcluster %s: %s received, stopping (at most %ss)",
                os.getpid(),
                signal.Signals(signum).name,
                grace,
            )
            stopper = threading.Thread(target=stop_cluster, args=(cluster,), daemon=True)
            stopper.start()
            stopper.join(grace)
            leftovers = _descendants(os.getpid())
            for pid in leftovers:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            _release_leases(sentinel_pid)
            logging.shutdown()
            os._exit(exit_code["value"])

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
        cluster.start()
        if options.get("run_once", False):
            stop(signal.SIGTERM, None)
        sweeper = Sweeper(stopping)
        sweeper.start()
        liveness = liveness_file()
        last_check = time.monotonic()
        broker_down_since: float | None = None
        while True:
            time.sleep(1)
            sentinel = cluster.sentinel
            if sentinel is not None and not sentinel.is_alive() and not stopping.is_set():
                logger.error("qcluster %s: the sentinel died; exiting", os.getpid())
                os._exit(1)
            if sentinel is not None and sentinel.is_alive() and sweeper.is_alive():
                with contextlib.suppress(OSError):
                    liveness.touch()
            # While the broker is down, look again every few seconds to say when it is back.
            every = CANARY_CHECK_S if broker_down_since is None else CANARY_CHECK_S / 6
            if time.monotonic() - last_check >= every:
                last_check = time.monotonic()
                check = _canary_check_closing()
                if check.state == "unreachable":
                    if broker_down_since is None:
                        broker_down_since = time.monotonic()
                        logger.error(
                            "qcluster %s: %s; staying up and trying again",
                            os.getpid(),
                            check.detail,
                        )
                    continue
                if broker_down_since is not None:
                    logger.warning(
                        "qcluster %s: the broker answers again after %.0f s",
                        os.getpid(),
                        time.monotonic() - broker_down_since,
                    )
                    broker_down_since = None
                if check.state == "wrong_key" and not stopping.is_set():
                    logger.error("qcluster %s stops: %s", os.getpid(), check.detail)
                    exit_code["value"] = 2
                    stop(signal.SIGTERM, None)
