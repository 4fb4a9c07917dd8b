"""Probe board pages from stored rows: latency and queries per request at 1,000 and 10,000
entries.

A throw-away database (as in :mod:`benchmarks_app.bench.api`) is seeded in bulk with one
scored submission per model on one suite; the board rows are written once by
``probe_board_refresh`` (as when runs end); then about 200 page requests go through the API
view in-process (Django's test client: routing, DRF, pagination and serialization, no
network) over a mix of pages, page sizes and orderings. Prints p50/p95 ms, the queries per
request (the same for every request, whatever the number of entries) and the ratio to the
audit board's figures before its rows were stored.
"""

from __future__ import annotations

import random
import time
from typing import Any, TextIO

from django.db import connection
from django.test.utils import override_settings
from django.urls import reverse

from benchmarks_app.bench._bench_database import planner_statistics_refresh
from benchmarks_app.bench._timing import succeeded_runs, time_gets
from benchmarks_app.bench.api import _scratch_database

SIZES = (1_000, 10_000)
REQUESTS = 200  # per size and page size
# The API's default page, and its largest (the serialization of 500 rows dominates there).
PAGE_SIZES = (50, 500)
WARMUP = 5
TARGET_P95_MS = 50.0
# The audit board computed per request (before stored rows), p50/p95 ms (bench/api.py).
ANCHORS = {1_000: (70.0, 199.0), 10_000: (1_023.0, 1_120.0)}


def seed(entries: int) -> Any:
    """``entries`` models, each with one scored report on suite ``bench-board``; the board's
    rows written once. Returns the suite."""
    from benchmarks_app.models import (
        Benchmark,
        ProbeRunReport,
        ProbeSuite,
        ResponseSubmission,
    )
    from benchmarks_app.services.probes.boards import probe_board_refresh

    rng = random.Random(entries)
    suite, _ = ProbeSuite.objects.get_or_create(name="bench-board")
    submissions = ResponseSubmission.objects.bulk_create(
        (
            ResponseSubmission(suite=suite, model_name=f"model-{i:05d}", is_baseline=i % 500 == 0)
            for i in range(entries)
        ),
        batch_size=2000,
    )
    runs = succeeded_runs(Benchmark.PROBES, probe_submission=submissions)
    reports = []
    for i, (run, sub) in enumerate(zip(runs, submissions, strict=True)):
        value = None if i % 10 == 3 else rng.random()
        ci = (
            None
            if value is None
            else {"metric": "resilience_index", "low": max(0, value - 0.05), "high": value + 0.05}
        )
        reports.append(
            ProbeRunReport(
                run=run,
                submission=sub,
                metrics={"suite_version": "benchv1", "counts": {"evaluated": 40}},
                resilience_index=value,
                pass_rate=rng.random(),
                severity_weighted_pass_rate=rng.random(),
                high_stakes_failure_rate=rng.random(),
                ci=ci,
            )
        )
    ProbeRunReport.objects.bulk_create(reports, batch_size=2000)
    planner_statistics_refresh()
    started = time.perf_counter()
    probe_board_refresh(suite=suite)
    return suite, time.perf_counter() - started


def _paths(entries: int, size: int) -> list[str]:
    url = reverse("api:probes-leaderboard")
    rng = random.Random(1)
    orderings = ["", "-pass_rate", "model", "-resilience_index", "rank_low"]
    paths = []
    for _ in range(REQUESTS):
        last_page = max(1, -(-entries // size))
        page = rng.choice([1, 2, last_page, rng.randint(1, last_page)])
        ordering = rng.choice(orderings)
        query = f"?suite=bench-board&page={page}&page_size={size}"
        paths.append(url + query + (f"&ordering={ordering}" if ordering else ""))
    return paths


def _measure(entries: int, size: int) -> dict[str, Any]:
    from django.test import Client

    client = Client()
    paths = _paths(entries, size)
    timed = time_gets(client, paths, warmup=WARMUP, headers={"Accept": "application/json"})
    timed.pop("first")
    return timed


def run(out: TextIO, *, sizes: tuple[int, ...] = SIZES) -> None:
    from django.conf import settings

    rates = {"anon": "1000000/min", "user": "1000000/min"}
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    out.write(
        f"{REQUESTS} API requests per size through /api/probes/leaderboard/ (in-process "
        f"test client, db: {connection.vendor}); pages at random (first, second, last, "
        "any), 5 orderings\n"
    )
    out.write(
        f"{'entries':>8}{'rows/page':>10}{'refresh s':>11}{'p50 ms':>9}{'p95 ms':>9}{'queries':>13}"
        f"{'p50 vs audit':>14}{'p95 vs audit':>14}{'p95<50ms':>10}\n"
    )
    for entries in sizes:
        with (
            override_settings(DEBUG=False, ALLOWED_HOSTS=["testserver"], REST_FRAMEWORK=rest),
            _scratch_database(),
        ):
            _, refresh_s = seed(entries)
            measured = [(size, _measure(entries, size)) for size in PAGE_SIZES]
        a50, a95 = ANCHORS.get(entries, (float("nan"), float("nan")))
        for size, m in measured:
            out.write(
                f"{entries:>8,}{size:>10}{refresh_s:>11.2f}{m['p50']:>9.1f}{m['p95']:>9.1f}"
                f"{'/'.join(map(str, m['queries'])):>13}{a50 / m['p50']:>13.1f}x"
                f"{a95 / m['p95']:>13.1f}x{'yes' if m['p95'] < TARGET_P95_MS else 'NO':>10}\n"
            )
