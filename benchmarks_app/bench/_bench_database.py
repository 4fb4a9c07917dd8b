"""The throw-away database ``make bench`` runs in, on PostgreSQL (issue 38).

``make bench`` runs on SQLite (a temporary file) unless ``DATABASE_URL`` points at
PostgreSQL, the production footing: then it runs in a database of that server named after the
configured one with ``_bench`` appended, dropped and created again here, so that the
configured database is never touched. The leading underscore keeps this module out of
``run_benchmarks``.
"""

from __future__ import annotations

from django.db import connection


def recreate() -> str:
    """Drop and create the configured database (``make bench`` names the ``_bench`` one);
    returns its name. PostgreSQL only: SQLite's file is removed by ``make bench`` itself."""
    if connection.vendor != "postgresql":
        raise RuntimeError(
            f"a bench database is recreated on PostgreSQL only, not {connection.vendor}"
        )
    name = str(connection.settings_dict["NAME"])
    if not name.endswith("_bench"):
        raise RuntimeError(f"refusing to drop {name!r}: the bench database's name ends in _bench")
    quoted = connection.ops.quote_name(name)
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quoted}")
        cursor.execute(f"CREATE DATABASE {quoted}")
    return name


def planner_statistics_refresh() -> None:
    """ANALYZE after a bulk seed on PostgreSQL, before anything reads what was seeded, as
    autovacuum would a minute later: with the statistics of the empty tables, the planner
    chose a nested loop for the probe board's full refresh (one row expected on each side),
    which ran for minutes at 10,000 entries. No-op on SQLite."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
