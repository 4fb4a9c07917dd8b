"""System checks run by ``manage.py check``, ``runserver`` and the other management commands."""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.contrib.staticfiles.storage import ManifestFilesMixin
from django.core.checks import CheckMessage, Error, Warning
from django.core.files.storage import storages
from django.db import DatabaseError, connection

STATIC_MANIFEST_MISSING = "benchmarks_app.E001"
CONNECTIONS_SHORT = "benchmarks_app.W002"

# Connections a cluster holds besides its workers': its sweeper thread, the monitor that
# saves task results, the pusher (ORM broker) and the scheduler.
CLUSTER_OWN_CONNECTIONS = 4

# Only these commands serve pages. Workers (qcluster) and migrations run on machines that
# need no static files, so they must not require collectstatic.
_PAGE_COMMANDS = frozenset({"runserver", "demo_serve", "check"})


def _serves_pages() -> bool:
    command = sys.argv[1] if len(sys.argv) > 1 and sys.argv[0].endswith("manage.py") else None
    return command is None or command in _PAGE_COMMANDS


def check_static_manifest(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """With DEBUG off, pages link static files through collectstatic's manifest.

    Without the manifest every HTML page is a 500 ("Missing staticfiles manifest entry"), so
    refuse to start instead and say how to fix it.
    """
    if settings.DEBUG or not _serves_pages():
        return []
    storage = storages["staticfiles"]
    if not isinstance(storage, ManifestFilesMixin) or storage.read_manifest() is not None:
        return []
    return [
        Error(
            f"The static files manifest ({storage.manifest_name} in STATIC_ROOT "
            f"{settings.STATIC_ROOT}) is missing, so every page would fail with a server error.",
            hint="Run `python manage.py collectstatic --noinput` (or set DEBUG=1 for development).",
            id=STATIC_MANIFEST_MISSING,
        )
    ]


def connections_per_worker(pieces_per_process: int, pool_size: int | None = None) -> int:
    """A worker process's PostgreSQL connections at most: with the pool (``DATABASE_POOL``),
    its size, whatever the number of pieces (each piece's thread and lease keeper hand their
    connection back between trips, :mod:`benchmarks_app.db_pool`); without it, each piece
    it drives holds one on its thread and its lease keeper another, plus the task's thread."""
    unpooled = 2 * pieces_per_process + 1
    return unpooled if pool_size is None else min(pool_size, unpooled)


def connections_needed(
    *, clusters: int, workers: int, pieces_per_process: int, pool_size: int | None = None
) -> int:
    """N clusters x W workers need at most N x (W x P + 4), P the pool's size (or, without
    the pool, 2 x RUN_PIECES_PER_PROCESS + 1)."""
    per_worker = connections_per_worker(pieces_per_process, pool_size)
    return clusters * (workers * per_worker + CLUSTER_OWN_CONNECTIONS)


def pool_size(alias: str = "default") -> int | None:
    """The connection pool's ``max_size`` per process (``DATABASE_POOL_SIZE``); None when
    connections are not pooled."""
    options = settings.DATABASES[alias].get("OPTIONS", {}).get("pool")
    if not options:
        return None
    return int(options.get("max_size", 4)) if isinstance(options, dict) else 4


def connection_budget_warnings() -> list[CheckMessage]:
    """On PostgreSQL: warn when ``max_connections`` (less the superuser reserve), or this
    role's ``CONNECTION LIMIT``, is below what ``Q_CLUSTERS`` clusters of ``Q_WORKERS``
    workers need at most, plus ``WEB_DB_CONNECTIONS`` for the web processes. Past it, "too
    many clients" fails sweeps and pieces (re-queued, but a run can reach its re-queue cap)
    and ``/health/``."""
    if connection.vendor != "postgresql":
        return []
    clusters = int(getattr(settings, "Q_CLUSTERS", 1))
    workers = int(settings.Q_CLUSTER.get("workers", 1))
    pieces = int(getattr(settings, "RUN_PIECES_PER_PROCESS", 16))
    pool = pool_size()
    need = connections_needed(
        clusters=clusters, workers=workers, pieces_per_process=pieces, pool_size=pool
    )
    need += int(getattr(settings, "WEB_DB_CONNECTIONS", 0))
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('max_connections')::int"
                " - current_setting('superuser_reserved_connections')::int,"
                " (SELECT CASE WHEN rolsuper THEN -1 ELSE rolconnlimit END"
                "  FROM pg_roles WHERE rolname = current_user)"
            )
            server, role_limit = cursor.fetchone()
    except DatabaseError:
        return []  # the database check of /health/ (and the first query) says so
    available = int(server)
    limit = "PostgreSQL accepts"
    if role_limit is not None and 0 <= int(role_limit) < available:
        available, limit = int(role_limit), "This database role's CONNECTION LIMIT is"
    if available >= need:
        return []
    each = (
        f"a pool of {pool} connections each (DATABASE_POOL_SIZE)"
        if pool is not None
        else f"up to {pieces} pieces each (RUN_PIECES_PER_PROCESS) without a pool"
    )
    return [
        Warning(
            f"{limit} {available} connections but {clusters} cluster(s) x {workers} worker(s) "
            f"with {each} need up to {need}.",
            hint="Raise the limit, set DATABASE_POOL=1 (each process then holds at most "
            "DATABASE_POOL_SIZE), or lower Q_WORKERS or DATABASE_POOL_SIZE (without the pool: "
            "RUN_PIECES_PER_PROCESS). N clusters x W workers need at most N x (W x P + 4), "
            "P = DATABASE_POOL_SIZE (without the pool: 2 x RUN_PIECES_PER_PROCESS + 1), plus "
            "WEB_DB_CONNECTIONS; set Q_CLUSTERS to the number of clusters.",
            id=CONNECTIONS_SHORT,
        )
    ]


def check_connection_budget(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """``manage.py check --database default`` (and ``migrate``): the warning above."""
    if not databases or "default" not in databases:
        return []
    return connection_budget_warnings()
