"""Polling reads that take no table locks on SQLite's shared-cache test database."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import connection


@contextlib.contextmanager
def reads_take_no_table_locks() -> Iterator[None]:
    """On SQLite's in-memory shared-cache test database, a test thread's polling reads took
    table read locks, and the worker thread writing that table beside them was answered
    "database table is locked" at once (no busy wait in shared-cache mode): its piece was
    re-queued as if the connection were lost and the run never got where the test waits
    (seen in CI). Read-uncommitted reads take no table locks; PostgreSQL never says so."""
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA read_uncommitted = 1")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA read_uncommitted = 0")
