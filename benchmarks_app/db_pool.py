"""A bounded number of PostgreSQL connections per process (``DATABASE_POOL=1``).

Django's pool (``OPTIONS["pool"]``, psycopg_pool) caps what one process holds at
``DATABASE_POOL_SIZE``; but a thread keeps the connection it took until it closes it, and a
worker drives up to ``RUN_PIECES_PER_PROCESS`` pieces, each with a thread and a lease keeper
that live for minutes while the piece mostly waits on the judge. So those threads hand their
connection back after each trip to the database (:func:`connection_release`,
:func:`orm_trip`): a piece holds one only while it reads or writes, and the pool, not the
number of pieces, bounds the process. Without the pool (SQLite, or ``DATABASE_POOL`` off)
nothing here changes anything: closing would only cost a new connection per trip.

A pool must not cross a fork: its idle connections are sockets the parent still uses. The
child forgets the inherited pools and connections without closing them (closing would end the
parent's sessions: libpq says goodbye on the shared socket) and opens its own.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS, connections

P = ParamSpec("P")
T = TypeVar("T")

# What a forked child inherited and must never use nor free (see the module's docstring).
_inherited: list[Any] = []


def pooled(alias: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether ``alias`` is served from Django's connection pool."""
    return bool(connections[alias].settings_dict.get("OPTIONS", {}).get("pool"))


def connection_release(alias: str = DEFAULT_DB_ALIAS) -> None:
    """Hand this thread's connection back to the pool, outside a transaction (pooled only)."""
    if not pooled(alias):
        return
    conn = connections[alias]
    if conn.connection is not None and not conn.in_atomic_block:
        conn.close()


def orm_trip(fn: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    """``sync_to_async(fn, thread_sensitive=True)`` whose thread hands its connection back to
    the pool when ``fn`` returns: a piece's loop makes a trip, then waits on the judge."""

    @functools.wraps(fn)
    def trip(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        finally:
            connection_release()

    return sync_to_async(trip, thread_sensitive=True)


def _forget_inherited() -> None:
    """In a forked child: drop the parent's pools and this thread's connections unclosed."""
    from django.db.backends.postgresql.base import DatabaseWrapper

    pools: dict[str, Any] = getattr(DatabaseWrapper, "_connection_pools", {})
    _inherited.extend(pools.values())
    pools.clear()
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and pooled(conn.alias):
            _inherited.append(conn.connection)
            conn.connection = None


def fork_guard_install() -> None:
    """Once per process (the app's ready()): children forget what they inherited."""
    os.register_at_fork(after_in_child=_forget_inherited)
