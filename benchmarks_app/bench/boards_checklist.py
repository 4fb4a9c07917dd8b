"""Checklist board pages from stored rows: latency and queries per request at 1,000 and
10,000 teams.

A throw-away database (as in :mod:`benchmarks_app.bench.api`) is seeded in bulk with one
team per entry, each with one scored G/A/T submission (one team in 500 a baseline); the
board's rows are written once by ``checklist_board_refresh`` (as when runs end). Then about
200 page requests of 50 rows go through ``/api/checklist/leaderboard/`` in-process (Django's
test client: routing, the board selector, DRF pagination in SQL and serialization; no
network), over a mix of pages and orderings. Prints p50/p95 ms, the queries per request
(the same for every request, whatever the number of teams) and the ratio to the audit
board's figures before its rows were stored.
"""

from __future__ import annotations

import gc
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
REQUESTS = 200  # per size
PAGE_SIZE = 50  # the API's default page
WARMUP = 5
TARGET_P95_MS = 50.0
CHALLENGE = "bench-board"
# The audit board computed per request (before stored rows), p50/p95 ms (bench/api.py).
ANCHORS = {1_000: (70.0, 199.0), 10_000: (1_023.0, float("nan"))}


def seed(entries: int) -> float:
    """``entries`` teams of challenge ``bench-board``, each with one scored triplet; the
    board written once. Returns the seconds the board refresh took."""
    from benchmarks_app.models import (
        Benchmark,
        Challenge,
        ChecklistScore,
        ChecklistSubmission,
        SubmissionKind,
        SubmissionStatus,
        Team,
    )
    from benchmarks_app.services.checklist.boards import checklist_board_refresh

    rng = random.Random(entries)
    challenge, _ = Challenge.objects.get_or_create(name="Bench board", slug=CHALLENGE)
    teams = Team.objects.bulk_create(
        (
            Team(challenge=challenge, name=f"team-{i:05d}", is_baseline=i % 500 == 0)
            for i in range(entries)
        ),
        batch_size=2000,
    )
    submissions = ChecklistSubmission.objects.bulk_create(
        (
            ChecklistSubmission(
                challenge=challenge,
                team=team,
                kind=SubmissionKind.TRIPLET,
                status=SubmissionStatus.SCORED,
                method_name=f"method {i % 37}",
            )
            for i, team in enumerate(teams)
        ),
        batch_size=2000,
    )
    runs = succeeded_runs(Benchmark.CHECKLIST, checklist_submission=submissions)
    scores = []
    for run, sub in zip(runs, submissions, strict=True):
        c_g, c_a, c_t = rng.random(), rng.random(), rng.random()
        r = rng.random()
        s = c_g * c_a * (1 - r) * c_t
        ci = {"metric": "s", "low": max(0.0, s - 0.03), "high": s + 0.03}
        scores.append(
            ChecklistScore(run=run, submission=sub, c_g=c_g, c_a=c_a, c_t=c_t, r=r, s=s, ci=ci)
        )
    ChecklistScore.objects.bulk_create(scores, batch_size=2000)
    planner_statistics_refresh()
    started = time.perf_counter()
    checklist_board_refresh(challenge=challenge, phase=None)
    return time.perf_counter() - started


def _paths(entries: int) -> list[str]:
    url = reverse("api:checklist-leaderboard")
    rng = random.Random(1)
    orderings = ["", "-s", "team", "-c_g", "created_at"]
    last_page = max(1, -(-entries // PAGE_SIZE))
    paths = []
    for _ in range(REQUESTS):
        page = rng.choice([1, 2, last_page, rng.randint(1, last_page)])
        ordering = rng.choice(orderings)
        query = f"?challenge={CHALLENGE}&page={page}&page_size={PAGE_SIZE}"
        paths.append(url + query + (f"&ordering={ordering}" if ordering else ""))
    return paths


def _measure(entries: int) -> dict[str, Any]:
    from django.test import Client

    client = Client()
    paths = _paths(entries)
    timed = time_gets(client, paths, warmup=WARMUP, headers={"Accept": "application/json"})
    timed.pop("first")
    return timed


def run(out: TextIO, *, sizes: tuple[int, ...] = SIZES) -> None:
    from django.conf import settings

    rates = {"anon": "1000000/min", "user": "1000000/min"}
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    out.write(
        f"{REQUESTS} API requests per size through /api/checklist/leaderboard/ (in-process "
        f"test client, db: {connection.vendor}), {PAGE_SIZE} rows a page; pages at random "
        "(first, second, last, any), 5 orderings\n"
    )
    out.write(
        f"{'teams':>8}{'refresh s':>11}{'p50 ms':>9}{'p95 ms':>9}{'queries':>9}"
        f"{'p50 vs audit':>14}{'p95 vs audit':>14}{'p95<50ms':>10}\n"
    )
    for entries in sizes:
        with (
            override_settings(DEBUG=False, ALLOWED_HOSTS=["testserver"], REST_FRAMEWORK=rest),
            _scratch_database(),
        ):
            refresh_s = seed(entries)
            # The seeding's garbage is not the requests' to collect.
            gc.collect()
            gc.freeze()
            try:
                m = _measure(entries)
            finally:
                gc.unfreeze()
        a50, a95 = ANCHORS.get(entries, (float("nan"), float("nan")))
        p95_ratio = f"{a95 / m['p95']:>13.1f}x" if a95 == a95 else f"{'—':>14}"
        out.write(
            f"{entries:>8,}{refresh_s:>11.2f}{m['p50']:>9.1f}{m['p95']:>9.1f}"
            f"{'/'.join(map(str, m['queries'])):>9}{a50 / m['p50']:>13.1f}x"
            f"{p95_ratio}{'yes' if m['p95'] < TARGET_P95_MS else 'NO':>10}\n"
        )
