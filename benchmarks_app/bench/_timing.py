"""What the board benches share: seeding succeeded runs, timing GET requests.

The leading underscore keeps this module out of ``run_benchmarks`` (it is not a benchmark).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

from django.db import close_old_connections, connection


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` by nearest rank (no interpolation)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def _end_request() -> None:
    # Not inside a transaction (a test's): closing there would break it.
    if not connection.in_atomic_block:
        close_old_connections()


def time_gets(
    client: Any, paths: Sequence[str], *, warmup: int = 5, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """GET each of ``paths`` (after ``warmup`` untimed ones): p50/p95/mean/max ms, the CPU
    ms of this process per request (``cpu_p50``/``cpu_p95``: with SQLite in process, the
    database's work too; a machine busy with other work inflates wall time, much less CPU
    time), and the distinct numbers of queries the requests made (one number: constant per
    request).

    Queries are counted as they run (``execute_wrapper``): the query log is reset when a
    request starts. Raises on any answer other than 200.

    After each request the database connection is closed or kept as a server's request end
    does (``close_old_connections``, which the test client skips): SQLite's (``CONN_MAX_AGE``
    0) is closed, so each request opens one and prepares its statements again, as served;
    PostgreSQL's (60 s) is kept. The test client's kept SQLite connection reused its
    prepared statements: a sorted page of a 100,000-entry board timed 11-18 ms less than
    served (issue 25).
    """
    extra = headers or {}
    for path in paths[:warmup]:
        client.get(path, headers=extra)
        _end_request()
    latencies: list[float] = []
    cpu: list[float] = []
    queries: set[int] = set()
    first: Any = None
    for path in paths:
        executed: list[str] = []

        def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            executed.append(sql)  # noqa: B023 - reset for each request above
            return execute(sql, params, many, context)

        with connection.execute_wrapper(count):
            started, cpu_started = time.perf_counter(), time.process_time()
            response = client.get(path, headers=extra)
            latencies.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - cpu_started) * 1000)
        _end_request()
        if response.status_code != 200:
            raise RuntimeError(f"{path}: {response.status_code} {response.content[:300]!r}")
        first = first if first is not None else response
        queries.add(len(executed))
    return {
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "mean": statistics.fmean(latencies),
        "max": max(latencies),
        "cpu_p50": percentile(cpu, 50),
        "cpu_p95": percentile(cpu, 95),
        "queries": sorted(queries),
        "n": len(latencies),
        "first": first,
    }


def succeeded_runs(benchmark: str, **targets: Sequence[Any]) -> list[Any]:
    """One succeeded, complete run per object of the one target given (bulk-created), e.g.
    ``succeeded_runs(Benchmark.PROBES, probe_submission=submissions)``."""
    from benchmarks_app.models import EvaluationRun, RunStatus

    ((field, objs),) = targets.items()
    return EvaluationRun.objects.bulk_create(
        (
            EvaluationRun(
                benchmark=benchmark,
                status=RunStatus.SUCCEEDED,
                is_complete=True,
                progress_done=1,
                progress_total=1,
                **{field: obj},
            )
            for obj in objs
        ),
        batch_size=2000,
    )
