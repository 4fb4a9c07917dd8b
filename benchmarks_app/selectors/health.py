"""Whether the web process can do its job: the database and the queue's broker answer."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connections

logger = logging.getLogger(__name__)


@dataclass
class Health:
    checks: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(state == "ok" for state in self.checks.values())


def _database() -> str:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        logger.warning("health: the database does not answer: %s", exc)
        # Closed, so that the next request reconnects instead of reusing a dead connection.
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


def site_health() -> Health:
    """The database and the broker, each ``ok`` or ``unreachable (<error type>)``."""
    return Health(checks={"database": _database(), "broker": _broker()})
