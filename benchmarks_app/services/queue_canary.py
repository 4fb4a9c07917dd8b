"""Signed canaries in the broker, so a process with another ``SECRET_KEY`` says so, and only
about itself.

django-q2 signs every task with ``SECRET_KEY``. A cluster whose key differs takes each task
off the queue, fails to verify it, logs a ``BadSignature`` traceback in its own log and drops
it (``django_q.pusher``): the run stalls with nothing on its page. Two records in the broker's
stats store (Redis, or the database cache of the ORM broker) let each side judge itself:

* **Writers** (the site, the commands, ``migrate``) keep a canary signed with their key under
  that key's fingerprint (``<prefix>:signing-canary:<fingerprint>``), and note which
  fingerprint wrote last. A cluster refuses to start, or stops, when no canary carries its
  fingerprint while another one does: nobody queues tasks it can read. One writer's key can
  never poison another's canary: each key has its own, and a cluster only reads its own.
* **Clusters** publish their fingerprint while they live (``<prefix>:cluster-key:<fp>``, a
  short expiry renewed by the running cluster). A writer finding live clusters none of which
  shares its key refuses to queue (:func:`queue_key_problem`) and does not write its canary:
  the wrong key is the one in the shell, and the good clusters keep working.

A broker that cannot be reached is not a wrong key: clusters wait, retry and say so
(:class:`CanaryCheck`'s ``unreachable``), they never exit on it. Fingerprints are HMACs of
the key, never the key. Clusters never write a canary: a misconfigured one must not make
itself right.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings
from django.utils import timezone
from django.utils.crypto import salted_hmac

logger = logging.getLogger(__name__)

# Long enough to outlive any pause between runs; rewritten whenever a run is queued.
CANARY_TTL_S = 30 * 24 * 3600
# A process queuing many pieces rewrites it at most this often.
REWRITE_EVERY_S = 60.0
# A cluster renews its fingerprint every CANARY_CHECK_S (qcluster); gone a while after it.
CLUSTER_KEY_TTL_S = 90

_state: dict[str, Any] = {"cluster": False, "written_at": -REWRITE_EVERY_S}

WRONG_KEY_TEXT = (
    "this process's SECRET_KEY differs from the one the site signs queue tasks with "
    "(the queue's signing canary does not verify): it could not read any task. Give "
    "every process the same SECRET_KEY."
)


@dataclass(frozen=True)
class CanaryCheck:
    """What a cluster learns from the canaries: ``ok``; ``unknown`` (no canary at all yet);
    ``unreachable`` (the broker did not answer: wait and try again); ``wrong_key``."""

    state: Literal["ok", "unknown", "unreachable", "wrong_key"]
    detail: str = ""


def key_fingerprint() -> str:
    """A stable name for this process's ``SECRET_KEY`` that does not reveal it."""
    from django_q.conf import Conf

    secret = str(Conf.SECRET_KEY or settings.SECRET_KEY)
    return salted_hmac("benchmarks_app.queue_canary", "signing-key", secret=secret).hexdigest()[:16]


def canary_key(fingerprint: str | None = None) -> str:
    from django_q.conf import Conf

    return f"{Conf.PREFIX}:signing-canary:{fingerprint or key_fingerprint()}"


def latest_writer_key() -> str:
    from django_q.conf import Conf

    return f"{Conf.PREFIX}:signing-canary:latest"


def cluster_key_key(fingerprint: str | None = None) -> str:
    from django_q.conf import Conf

    return f"{Conf.PREFIX}:cluster-key:{fingerprint or key_fingerprint()}"


def mark_cluster_process() -> None:
    """This process (and those it forks) runs tasks: it reads the canary, never writes it."""
    _state["cluster"] = True


def _store(broker: Any, key: str, payload: str, ttl_s: int) -> None:
    """Keep a record where ``get_stat`` finds it, but out of the list of cluster stats.

    django-q2's cache-backed stats (the ORM broker's) list every key written with
    ``set_stat`` under ``Q_STAT``, and ``Stat.get_all`` returns them all as clusters: a
    canary would pass for a live cluster (``run_wait`` would then wait for a worker that is
    not there) and break ``qinfo``/``qmonitor``. Such brokers get it through their cache,
    which ``get_stat`` reads; brokers with their own stats store (Redis) keep it there.
    """
    from django_q.brokers import Broker

    if type(broker).set_stat is Broker.set_stat and getattr(broker, "cache", None) is not None:
        broker.cache.set(key, payload, ttl_s)
    else:
        broker.set_stat(key, payload, ttl_s)


def _text(payload: Any) -> str:
    if isinstance(payload, bytes):
        return payload.decode()
    return str(payload or "")


def latest_cluster_key() -> str:
    from django_q.conf import Conf

    return f"{Conf.PREFIX}:cluster-key:latest"


def queue_key_problem() -> str | None:
    """Why tasks this process queues would be read by no live cluster, or None.

    Only a writer asks: a cluster published its key's fingerprint within
    ``CLUSTER_KEY_TTL_S`` and none with this process's key did (a shell started with another
    ``SECRET_KEY``). Read from unsigned records: a wrong key cannot read django-q2's signed
    cluster stats. None when it cannot tell (no live cluster, the broker down: the queue
    reports that itself).
    """
    from django_q.brokers import get_broker

    if _state["cluster"] or settings.Q_CLUSTER.get("sync"):
        return None
    try:
        broker = get_broker()
        if broker.get_stat(cluster_key_key()):
            return None
        latest = _text(broker.get_stat(latest_cluster_key()))
    except Exception:
        logger.debug("could not compare keys with the clusters", exc_info=True)
        return None
    if not latest or latest == key_fingerprint():
        return None
    return (
        "this process's SECRET_KEY differs from that of the running qcluster(s): none of "
        "them could read a task it queues. Give every process the same SECRET_KEY."
    )


def queue_canary_write(*, force: bool = False) -> bool:
    """Sign this key's canary (never from a cluster, nor with a key no live cluster shares);
    errors are logged. True when written."""
    from django_q.brokers import get_broker
    from django_q.signing import SignedPackage

    if _state["cluster"]:
        return False
    now = time.monotonic()
    if not force and now - _state["written_at"] < REWRITE_EVERY_S:
        return False
    if problem := queue_key_problem():
        logger.error("not signing the queue's canary: %s", problem)
        _state["written_at"] = now
        return False
    try:
        payload = SignedPackage.dumps({"canary": True, "at": timezone.now().isoformat()})
        broker = get_broker()
        _store(broker, canary_key(), payload, CANARY_TTL_S)
        _store(broker, latest_writer_key(), key_fingerprint(), CANARY_TTL_S)
        _state["written_at"] = now
    except Exception:  # the queue itself reports a broker that is down
        logger.warning("could not write the queue's signing canary", exc_info=True)
        return False
    return True


def queue_cluster_key_publish() -> None:
    """A cluster says which key it reads tasks with (renewed while it runs); errors raise."""
    from django_q.brokers import get_broker

    broker = get_broker()
    _store(broker, cluster_key_key(), "1", CLUSTER_KEY_TTL_S)
    _store(broker, latest_cluster_key(), key_fingerprint(), CLUSTER_KEY_TTL_S)


def queue_canary_check() -> CanaryCheck:
    """What a cluster can tell about its key from the canaries (see :class:`CanaryCheck`).

    ``unknown`` when no writer has signed a canary yet (nothing queued since the broker was
    emptied): the periodic check in ``qcluster`` catches a wrong key later.
    """
    from django_q.brokers import get_broker
    from django_q.signing import BadSignature, SignedPackage

    try:
        broker = get_broker()
        own = _text(broker.get_stat(canary_key()))
        latest = _text(broker.get_stat(latest_writer_key()))
    except Exception as exc:
        return CanaryCheck(
            "unreachable", f"the broker cannot be read ({type(exc).__name__}: {exc})"
        )
    if not own:
        if latest and latest != key_fingerprint():
            return CanaryCheck("wrong_key", WRONG_KEY_TEXT)
        return CanaryCheck("unknown")
    try:
        SignedPackage.loads(own)
    except BadSignature:
        return CanaryCheck("wrong_key", WRONG_KEY_TEXT)
    except Exception as exc:
        return CanaryCheck(
            "wrong_key", f"the queue's signing canary is unreadable ({type(exc).__name__})"
        )
    return CanaryCheck("ok")


def queue_canary_problem() -> str | None:
    """One line saying why this process cannot read the queue's tasks, or None (a broker that
    cannot be reached is not such a reason: see :func:`queue_canary_check`)."""
    check = queue_canary_check()
    return check.detail if check.state == "wrong_key" else None
