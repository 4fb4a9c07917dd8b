"""Run lists at 3,000, 30,000 and 300,000 runs: ``/runs/``, ``/api/runs/`` and the home page
(issue 25, item 3).

For each size, a throw-away database (as in :mod:`benchmarks_app.bench.api`) is seeded in bulk
(``bulk_create`` in batches): runs of the three benchmarks in equal parts (audit runs of 500
scanners on one release, probe runs of 500 submissions, checklist runs of 500 teams'
submissions, one in twenty failed, created in the order of their ids), so that a list's
count, order and page read what a real database of that size holds. Then ``READS`` GETs per
case, anonymous and as a checklist team's member (whose visibility adds the team's entries),
through the whole Django stack (test client, no sockets): p50/p95/max ms and the queries of one
request. A page past the first is read by number, as users page.
"""

from __future__ import annotations

import gc
import logging
import random
import time
from typing import Any, TextIO

from django.db import connection
from django.test import Client
from django.test.utils import override_settings

from benchmarks_app.bench._timing import time_gets
from benchmarks_app.bench.api import _scratch_database

SIZES = (3_000, 30_000, 300_000)
READS = 30  # per case, after warm-up
WARMUP = 3
TARGETS = 500  # scanners, probe submissions and checklist teams the runs belong to
BATCH = 10_000


def seed_runs(total: int, *, seed: int = 3) -> Any:
    """``total`` runs, a third of each benchmark, in bulk; returns a user of one team."""
    from django.contrib.auth import get_user_model

    from benchmarks_app.models import (
        AuditDataset,
        Benchmark,
        Challenge,
        ChecklistSubmission,
        EvaluationRun,
        Membership,
        ProbeSuite,
        Repo,
        ResponseSubmission,
        RunStatus,
        Scanner,
        SubmissionStatus,
        Team,
    )
    from benchmarks_app.services.audit import audit_release_create, audit_release_publish

    rng = random.Random(seed)
    repo = Repo.objects.create(project_id="bench_runs_2025_01", name="Bench runs")
    dataset = AuditDataset.objects.create(slug="bench-runs", name="Bench runs")
    dataset.repos.add(repo)
    release = audit_release_publish(release=audit_release_create(dataset=dataset))
    scanners = Scanner.objects.bulk_create(
        Scanner(name=f"runs-scanner-{i}") for i in range(TARGETS)
    )
    suite = ProbeSuite.objects.create(name="bench-runs")
    submissions = ResponseSubmission.objects.bulk_create(
        ResponseSubmission(suite=suite, model_name=f"runs-model-{i}") for i in range(TARGETS)
    )
    challenge = Challenge.objects.create(slug="bench-runs", name="Bench runs")
    teams = Team.objects.bulk_create(
        Team(challenge=challenge, name=f"runs-team-{i}") for i in range(TARGETS)
    )
    entries = ChecklistSubmission.objects.bulk_create(
        ChecklistSubmission(challenge=challenge, team=team, status=SubmissionStatus.SCORED)
        for team in teams
    )
    member = get_user_model().objects.create_user(username="runs-member", password="x")
    Membership.objects.create(team=teams[0], user=member, challenge=challenge)
    kinds: list[tuple[str, str, list[Any], dict[str, Any]]] = [
        (Benchmark.AUDIT, "scanner", scanners, {"release": release, "judge": "offline"}),
        (Benchmark.PROBES, "probe_submission", submissions, {}),
        (Benchmark.CHECKLIST, "checklist_submission", entries, {}),
    ]
    for start in range(0, total, BATCH):
        batch = []
        for i in range(start, min(total, start + BATCH)):
            benchmark, field, targets, extra = kinds[i % 3]
            failed = rng.random() < 0.05
            batch.append(
                EvaluationRun(
                    benchmark=benchmark,
                    status=RunStatus.FAILED if failed else RunStatus.SUCCEEDED,
                    is_complete=not failed,
                    progress_done=1,
                    progress_total=1,
                    **{field: targets[rng.randrange(TARGETS)]},
                    **extra,
                )
            )
        EvaluationRun.objects.bulk_create(batch, batch_size=2_000)
    # What the minute's sweep does to the run counts' changes (on PostgreSQL a few rows per
    # insert statement): the home page then reads one row per key, as it does in service.
    from benchmarks_app.services.run_counts import run_counts_fold

    run_counts_fold()
    return member


def _reads(size: int) -> list[tuple[str, str]]:
    last = -(-size // 50)
    return [
        ("/runs/ page 1", "/runs/"),
        ("/runs/ page 2", "/runs/?page=2"),
        ("/runs/?benchmark=audit", "/runs/?benchmark=audit"),
        ("/runs/?status=failed", "/runs/?status=failed"),
        ("/api/runs/ page 1", "/api/runs/"),
        ("/api/runs/ page 2", "/api/runs/?page=2"),
        ("/api/runs/ deep page", f"/api/runs/?page={max(1, last // 10)}"),
        ("/api/runs/?benchmark=probes", "/api/runs/?benchmark=probes"),
        ("home page /", "/"),
    ]


def run(out: TextIO, *, sizes: tuple[int, ...] = SIZES, reads: int = READS) -> None:
    from django.conf import settings

    rates = {"anon": "1000000000/min", "user": "1000000000/min"}
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    hosts = [*settings.ALLOWED_HOSTS, "testserver"]
    out.write(
        f"db: {connection.vendor}; per size a fresh database seeded in bulk (a third of the "
        f"runs per benchmark, {TARGETS} entrants each); {reads} GETs per case after {WARMUP} "
        "warm-up (test client: middleware, DRF, templates; no sockets); anonymous, then as a "
        "checklist team's member\n"
    )
    for size in sizes:
        with (
            override_settings(DEBUG=False, ALLOWED_HOSTS=hosts, REST_FRAMEWORK=rest),
            _scratch_database(),
        ):
            started = time.perf_counter()
            member = seed_runs(size)
            out.write(f"\n{size:,} runs: seeded in {time.perf_counter() - started:.1f}s\n")
            if connection.vendor == "postgresql":
                # What autovacuum does within a minute of a bulk load (as boards_scale does):
                # without statistics PostgreSQL plans the lists' queries for an empty table.
                with connection.cursor() as cursor:
                    cursor.execute("VACUUM ANALYZE")
                out.write("  (PostgreSQL: VACUUM ANALYZE after seeding, as autovacuum would)\n")
            # One write per line: a management command's stdout ends every write with one.
            out.write(
                f"  {'who':<10}{'read':<30}{'queries':>8}{'p50 ms':>8}{'p95 ms':>8}"
                f"{'max ms':>8}{'CPU p50':>8}{'CPU p95':>8}\n"
            )
            gc.collect()
            gc.freeze()
            # django-axes logs every login at INFO: not what this bench prints.
            axes = logging.getLogger("axes")
            level = axes.level
            axes.setLevel(logging.WARNING)
            try:
                for who in ("anonymous", "member"):
                    client = Client()
                    if who == "member":
                        client.force_login(member)
                    for case, url in _reads(size):
                        m = time_gets(
                            client,
                            [url] * reads,
                            warmup=WARMUP,
                            headers={"Accept": "application/json"} if "/api/" in url else None,
                        )
                        out.write(
                            f"  {who:<10}{case:<30}{'/'.join(map(str, m['queries'])):>8}"
                            f"{m['p50']:>8.1f}{m['p95']:>8.1f}{m['max']:>8.1f}"
                            f"{m['cpu_p50']:>8.1f}{m['cpu_p95']:>8.1f}\n"
                        )
            finally:
                axes.setLevel(level)
                gc.unfreeze()
