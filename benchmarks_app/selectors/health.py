"""Whether the web process can do its job: the database and the queue's broker answer, writes
get space; and whether the queue has anyone to do its work (live ``qcluster``s).

Asked by load balancers and alerts, so every answer comes quickly: the database is read over
a connection of its own with short connect and statement timeouts
(:func:`short_database_timeouts`), never one a black-holed server holds for minutes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connections

from benchmarks_app.models import RunPiece

logger = logging.getLogger(__name__)


@dataclass
class Health:
    checks: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(state == "ok" or state.startswith("ok ") for state in self.checks.values())


def health_timeout_s() -> float:
    return float(getattr(settings, "HEALTH_DB_TIMEOUT_S", 2.0))


@contextmanager
def short_database_timeouts() -> Iterator[None]:
    """Read the database, inside this block, over a fresh connection that gives up within
    ``HEALTH_DB_TIMEOUT_S``: to connect (``connect_timeout``), per statement
    (``statement_timeout``) and when the server stops acknowledging (``tcp_user_timeout``,
    a black hole) on PostgreSQL; to wait for a lock on SQLite. Closed on the way out.

    Inside a caller's transaction (a test's) the connection is left as it is: closing it
    would end the transaction.
    """
    conn = connections["default"]
    if conn.in_atomic_block:
        yield
        return
    saved = conn.settings_dict
    options = dict(saved.get("OPTIONS") or {})
    # Not from the pool (DATABASE_POOL): its connections were opened without these timeouts,
    # and a pool whose connections are all taken would keep the answer waiting.
    options.pop("pool", None)
    timeout = health_timeout_s()
    if conn.vendor == "postgresql":
        ms = int(timeout * 1000)
        options["connect_timeout"] = max(2, math.ceil(timeout))  # libpq's least is 2 s
        options["tcp_user_timeout"] = ms
        options["options"] = f"{options.get('options', '')} -c statement_timeout={ms}".strip()
    elif conn.vendor == "sqlite":
        options["timeout"] = timeout
    with suppress(Exception):
        conn.close()
    conn.settings_dict = {**saved, "OPTIONS": options}
    try:
        yield
    finally:
        with suppress(Exception):
            conn.close()
        conn.settings_dict = saved


def _database() -> str:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        logger.warning("health: the database does not answer: %s", exc)
        # Closed, so that the next request reconnects instead of reusing a dead connection.
        with suppress(Exception):
            connections["default"].close_if_unusable_or_obsolete()
        return f"unreachable ({type(exc).__name__})"
    return "ok"


def _broker() -> str:
    from django_q.brokers import get_broker

    if settings.Q_CLUSTER.get("sync"):
        return "ok"  # tasks run in the caller's process: no broker to reach
    try:
        broker = get_broker()
        if settings.Q_CLUSTER.get("redis"):
            broker.ping()
        else:
            broker.queue_size()  # the ORM broker is a table of the database
    except Exception as exc:
        logger.warning("health: the broker does not answer: %s", exc)
        return f"unreachable ({type(exc).__name__})"
    return "ok"


def _storage() -> str:
    """``failing: <cause>`` while pieces are parked because a write found no space."""
    try:
        parked = RunPiece.objects.parked_on_write_failure()
        count = parked.count()
        if not count:
            return "ok"
        cause = parked.order_by("-pk").values_list("error", flat=True).first() or ""
    except Exception as exc:
        return f"unknown ({type(exc).__name__})"
    return f"failing: {count} piece(s) parked; {cause}"[:500]


def clusters_alive() -> int | None:
    """How many ``qcluster``s report to the broker (their stats expire in seconds); None
    when the broker cannot be read."""
    from django_q.status import Stat

    try:
        return sum(
            1
            for stat in Stat.get_all()
            # Only clusters' own stats: anything else a broker lists there is not a worker.
            if getattr(stat, "cluster_id", None) and getattr(stat, "status", "") != "Stopped"
        )
    except Exception:
        logger.warning("health: the clusters' stats cannot be read", exc_info=True)
        return None


def clusters_state() -> str:
    """``ok (<n> alive)``, ``none alive``, or why it cannot be told."""
    if settings.Q_CLUSTER.get("sync"):
        return "ok (synchronous queue: tasks run where they are queued)"
    alive = clusters_alive()
    if alive is None:
        return "unknown (the broker cannot be read)"
    return f"ok ({alive} alive)" if alive else "none alive"


def site_health() -> Health:
    """The database, the broker and storage: each ``ok`` or what is wrong."""
    database = _database()
    checks = {"database": database, "broker": _broker()}
    checks["storage"] = _storage() if database == "ok" else "unknown (no database)"
    return Health(checks=checks)


def queue_health() -> Health:
    """Whether queued runs will be worked on: the broker answers and a cluster is alive."""
    return Health(checks={"broker": _broker(), "clusters": clusters_state()})
