"""A bounded number of PostgreSQL connections per process (issue 40, item 3).

``DATABASE_POOL=1`` serves every process from Django's pool (psycopg_pool) of
``DATABASE_POOL_SIZE``; a worker's pieces and lease keepers hand their connection back after
each trip (:mod:`benchmarks_app.db_pool`), so the pool bounds the process whatever the number
of pieces; a forked child never uses the pool or connection it inherited. The whole cluster
under a role limited to the budget is the chaos scenario ``connection_budget``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, connections

from benchmarks_app import checks
from benchmarks_app.checks import connection_budget_warnings, connections_needed
from benchmarks_app.db_pool import _forget_inherited, connection_release, orm_trip
from config import env as envparse

PG_URL = "postgres://u:p@db.example:5432/evals"


def test_the_pool_is_opt_in_on_postgresql_only_and_sized_from_the_worker(tmp_path: Path) -> None:
    plain = envparse.database({"DATABASE_URL": PG_URL}, tmp_path)
    assert "pool" not in plain.get("OPTIONS", {}) and plain["CONN_MAX_AGE"] == 60
    pooled = envparse.database({"DATABASE_URL": PG_URL, "DATABASE_POOL": "1"}, tmp_path)
    # Django's pool refuses persistent connections.
    assert pooled["CONN_MAX_AGE"] == 0
    assert pooled["OPTIONS"]["pool"]["max_size"] == 4
    assert pooled["OPTIONS"]["pool"]["min_size"] == 0
    one_piece = {"DATABASE_URL": PG_URL, "DATABASE_POOL": "1", "RUN_PIECES_PER_PROCESS": "1"}
    assert envparse.database(one_piece, tmp_path)["OPTIONS"]["pool"]["max_size"] == 3
    sized = {"DATABASE_URL": PG_URL, "DATABASE_POOL": "1", "DATABASE_POOL_SIZE": "7"}
    assert envparse.database(sized, tmp_path)["OPTIONS"]["pool"]["max_size"] == 7
    with pytest.raises(envparse.ImproperlyConfiguredEnv, match="DATABASE_POOL_SIZE=1"):
        envparse.database({**sized, "DATABASE_POOL_SIZE": "1"}, tmp_path)
    # SQLite is left as it was.
    sqlite = envparse.database({"DATABASE_POOL": "1"}, tmp_path)
    assert "pool" not in sqlite["OPTIONS"] and sqlite["CONN_MAX_AGE"] == 0


def test_with_the_pool_the_budget_does_not_grow_with_the_pieces() -> None:
    # The README: N clusters x W workers need at most N x (W x P + 4).
    for pieces in (1, 16, 64):
        pooled = connections_needed(clusters=2, workers=2, pieces_per_process=pieces, pool_size=2)
        assert pooled == min(2 * (2 * 2 + 4), 2 * (2 * (2 * pieces + 1) + 4))
    assert connections_needed(clusters=2, workers=2, pieces_per_process=16) == 140
    assert connections_needed(clusters=2, workers=2, pieces_per_process=16, pool_size=4) == 24


@pytest.fixture
def pool_of_two() -> Iterator[Any]:
    """The test database served from a pool of 2 (a second's wait) for the test's threads."""
    if connection.vendor != "postgresql":
        pytest.skip("Django's connection pool is PostgreSQL's")
    settings = connection.settings_dict
    saved = (settings["CONN_MAX_AGE"], dict(settings["OPTIONS"]))
    settings["CONN_MAX_AGE"] = 0
    settings["OPTIONS"] = {**saved[1], "pool": {"min_size": 0, "max_size": 2, "timeout": 1.0}}
    try:
        yield getattr(connection, "pool")  # noqa: B009 - PostgreSQL's wrapper only
    finally:
        connection.close_pool()  # type: ignore[attr-defined]
        settings["CONN_MAX_AGE"], settings["OPTIONS"] = saved


def _backend_pid() -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _pieces(count: int, trip: Any) -> list[BaseException]:
    """``count`` threads, each a piece's loop: three trips with judge waits between (0.6 s
    each: a piece lives longer than the pool's one-second wait)."""
    errors: list[BaseException] = []

    async def piece() -> None:
        for _ in range(3):
            await trip(_backend_pid)()
            await asyncio.sleep(0.6)  # a judge call in flight

    def thread_main() -> None:
        try:
            async_to_sync(piece)()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=thread_main) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


@pytest.mark.postgres
@pytest.mark.django_db
def test_eight_pieces_share_a_pool_of_two(pool_of_two: Any) -> None:
    assert _pieces(8, orm_trip) == []
    stats = pool_of_two.get_stats()
    assert stats["connections_num"] <= 2, stats  # never more than 2 opened
    assert stats["requests_num"] >= 8 * 3, stats  # every trip took one from the pool


@pytest.mark.postgres
@pytest.mark.django_db
def test_pieces_that_keep_their_connection_exhaust_the_pool(pool_of_two: Any) -> None:
    # What orm_trip avoids: a thread that keeps its connection between trips starves the rest.
    def holding(fn: Any) -> Any:
        return sync_to_async(fn, thread_sensitive=True)

    errors = _pieces(4, holding)
    assert errors and "couldn't get a connection" in str(errors[0]), errors


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_forked_child_never_uses_what_it_inherited(pool_of_two: Any) -> None:
    """The child forgets the parent's pool and connection unclosed (closing would end the
    parent's session on the shared socket) and opens its own; the parent's still works."""
    seen: dict[str, int] = {}

    def parent_thread() -> None:
        seen["parent"] = _backend_pid()  # this thread holds a pooled connection
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            status = 1
            try:
                _forget_inherited()
                os.write(write, str(_backend_pid()).encode())
                connection_release()
                status = 0
            finally:
                os._exit(status)
        os.close(write)
        answer = os.read(read, 64)
        os.close(read)
        _, status = os.waitpid(pid, 0)
        seen["child_status"] = status
        seen["child"] = int(answer or 0)
        seen["parent_after"] = _backend_pid()
        connections.close_all()

    thread = threading.Thread(target=parent_thread)
    thread.start()
    thread.join(timeout=30)
    assert seen["child_status"] == 0, seen
    assert seen["child"] and seen["child"] != seen["parent"], seen
    assert seen["parent_after"] == seen["parent"], seen


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_start_up_check_reads_the_roles_connection_limit(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A role limited below the budget is warned about, though the server has room: the
    chaos scenario's clusters run as such a role, at exactly their budget."""
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's roles")
    settings.Q_CLUSTERS = 1
    settings.RUN_PIECES_PER_PROCESS = 1
    monkeypatch.setattr(checks, "pool_size", lambda: 2)  # DATABASE_POOL=1 DATABASE_POOL_SIZE=2
    workers = int(settings.Q_CLUSTER.get("workers", 1))
    need = connections_needed(clusters=1, workers=workers, pieces_per_process=1, pool_size=2)
    role = f"budget_probe_{os.getpid()}"  # roles are the server's: one per test process
    assert connection_budget_warnings() == []  # the test's superuser: the server's limit
    with connection.cursor() as cursor:  # rolled back with the test's transaction
        cursor.execute(f"CREATE ROLE {role} CONNECTION LIMIT {need - 1}")
        cursor.execute(f"SET LOCAL ROLE {role}")
    (warning,) = connection_budget_warnings()
    assert f"CONNECTION LIMIT is {need - 1} connections" in warning.msg, warning.msg
    assert f"a pool of 2 connections each (DATABASE_POOL_SIZE) need up to {need}" in warning.msg
    with connection.cursor() as cursor:
        cursor.execute("RESET ROLE")
        cursor.execute(f"ALTER ROLE {role} CONNECTION LIMIT {need}")
        cursor.execute(f"SET LOCAL ROLE {role}")
    try:
        assert connection_budget_warnings() == []
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")


@pytest.mark.postgres
@pytest.mark.django_db
def test_health_reads_outside_the_pool_with_its_short_timeouts(pool_of_two: Any) -> None:
    """/health/ and /metrics give up within HEALTH_DB_TIMEOUT_S: a pooled connection has no
    such timeouts, and an exhausted pool would make them wait for it."""
    from benchmarks_app.selectors.health import health_timeout_s, short_database_timeouts

    seen: dict[str, Any] = {}

    def request() -> None:
        try:
            _backend_pid()  # a pooled connection first, as a web thread has
            seen["pooled_before"] = hasattr(connection.connection, "_pool")
            with short_database_timeouts():
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT setting FROM pg_settings WHERE name = 'statement_timeout'"
                    )
                    seen["statement_timeout"] = cursor.fetchone()[0]
                seen["pooled_inside"] = hasattr(connection.connection, "_pool")
        finally:
            connections.close_all()

    thread = threading.Thread(target=request)
    thread.start()
    thread.join(timeout=30)
    ms = str(int(health_timeout_s() * 1000))
    assert seen == {"pooled_before": True, "statement_timeout": ms, "pooled_inside": False}
