"""A signed canary in the broker, so a ``qcluster`` with another ``SECRET_KEY`` says so.

django-q2 signs every task with ``SECRET_KEY``. A cluster whose key differs takes each task
off the queue, fails to verify it, logs a ``BadSignature`` traceback in its own log and drops
it (``django_q.pusher``): the run stalls with nothing on its page. So the processes that queue
runs (the site, the commands, ``migrate``) keep a canary signed with their key where every
cluster can read it (the broker's stats store: Redis, or the database cache of the ORM
broker), and ``qcluster`` refuses to start, or stops, when it cannot verify it, with one line
saying why. Clusters never write the canary: a misconfigured one must not make itself right.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.utils import timezone

logger = logging.getLogger(__name__)

# Long enough to outlive any pause between runs; rewritten whenever a run is queued.
CANARY_TTL_S = 30 * 24 * 3600
# A process queuing many pieces rewrites it at most this often.
REWRITE_EVERY_S = 60.0

_state = {"cluster": False, "written_at": -REWRITE_EVERY_S}


def canary_key() -> str:
    from django_q.conf import Conf

    return f"{Conf.PREFIX}:signing-canary"


def mark_cluster_process() -> None:
    """This process (and those it forks) runs tasks: it reads the canary, never writes it."""
    _state["cluster"] = True


def _store(broker: Any, payload: str) -> None:
    """Keep the canary where ``get_stat`` finds it, but out of the list of cluster stats.

    django-q2's cache-backed stats (the ORM broker's) list every key written with
    ``set_stat`` under ``Q_STAT``, and ``Stat.get_all`` returns them all as clusters: the
    canary would pass for a live cluster (``run_wait`` would then wait for a worker that is
    not there) and break ``qinfo``/``qmonitor``. Such brokers get it through their cache,
    which ``get_stat`` reads; brokers with their own stats store (Redis) keep it there.
    """
    from django_q.brokers import Broker

    if type(broker).set_stat is Broker.set_stat and getattr(broker, "cache", None) is not None:
        broker.cache.set(canary_key(), payload, CANARY_TTL_S)
    else:
        broker.set_stat(canary_key(), payload, CANARY_TTL_S)


def queue_canary_write(*, force: bool = False) -> None:
    """Sign the canary with this process's key (never from a cluster); errors are logged."""
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    if _state["cluster"]:
        return
    now = time.monotonic()
    if not force and now - _state["written_at"] < REWRITE_EVERY_S:
        return
    try:
        payload = SignedPackage.dumps({"canary": True, "at": timezone.now().isoformat()})
        _store(get_broker(), payload)
        _state["written_at"] = now
    except Exception:  # the queue itself reports a broker that is down
        logger.warning("could not write the queue's signing canary", exc_info=True)


def queue_canary_problem() -> str | None:
    """One line saying why this process cannot read the queue's tasks, or None.

    None too when there is no canary yet (nothing queued since the broker was emptied): the
    check cannot tell, and the periodic check in ``qcluster`` catches it later.
    """
    from django_q.brokers import get_broker
    from django_q.signing import BadSignature, SignedPackage

    try:
        payload = get_broker().get_stat(canary_key())
    except Exception as exc:
        return f"the broker cannot be read ({type(exc).__name__}: {exc})"
    if not payload:
        return None
    if isinstance(payload, bytes):
        payload = payload.decode()
    try:
        SignedPackage.loads(payload)
    except BadSignature:
        return (
            "this process's SECRET_KEY differs from the one the site signs queue tasks with "
            "(the queue's signing canary does not verify): it could not read any task. Give "
            "every process the same SECRET_KEY."
        )
    except Exception as exc:
        return f"the queue's signing canary is unreadable ({type(exc).__name__})"
    return None
