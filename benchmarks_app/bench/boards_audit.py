"""Audit board pages read from stored rows: latency and queries per request (issue 14).

Before, every request built every entry and ranked it in Python before paging (anchors
below, ``ANCHOR_*``). Now a page is read from ``AuditBoardRow`` (one row per scanner, written
when a run ends): one ``LIMIT`` query and a count, whatever the number of scanners.

In a throw-away database (the project's is untouched), 1,000 and then 10,000 scanners' rows
are bulk-created on one board, then ``REQUESTS`` requests of one 50-row page go through the
whole Django stack (middleware, DRF, throttling) with the test client, for the default order,
an ``?ordering=`` on a stored count and a deep page. Printed: p50/p95 ms, queries per request
and the ratio against the anchors. The target: p95 under ``TARGET_P95_MS`` at 10,000 scanners
on SQLite, with the same number of queries per request at both sizes.
"""

from __future__ import annotations

import gc
import random
import time
import warnings
from typing import Any, TextIO

from django.db import connection
from django.test import Client
from django.test.utils import override_settings

from benchmarks_app.bench._timing import time_gets
from benchmarks_app.bench.api import _scratch_database

SIZES = (1_000, 10_000)
REQUESTS = 200
WARMUP = 10
PAGE_SIZE = 50
TARGET_P95_MS = 50.0
# Before (issue 14): the audit board with every entry built and ranked in Python per request.
ANCHOR_MS = {100: (11.0, None), 1_000: (70.0, 199.0), 10_000: (1_023.0, 1_120.0)}
URL = "/api/audit/leaderboard/"


def seed_audit_board(entries: int, *, seed: int = 7) -> Any:
    """``entries`` scanners' rows on one board (release ``bench@1``, judge offline), in bulk.

    One in ten is incomplete (evaluated on part of the release: unranked, listed below); one
    in twenty reported nothing, so its precision is missing. Returns the release.
    """
    from benchmarks_app.models import AuditDataset, Repo, Scanner
    from benchmarks_app.models.audit import (
        AuditBoardRow,
        audit_board_sort_fields,
        audit_metric_columns,
    )
    from benchmarks_app.selectors.board_marks import AUDIT_SHAPE, ties_all
    from benchmarks_app.services.audit import audit_release_create, audit_release_publish

    rng = random.Random(seed)
    repos = [
        Repo.objects.get_or_create(project_id=f"bench_board_{i}_2025_01", name=f"Repo {i}")[0]
        for i in range(4)
    ]
    dataset, _ = AuditDataset.objects.get_or_create(slug="bench-board", defaults={"name": "B"})
    release = dataset.releases.filter(is_published=True).first()
    if release is None:
        dataset.repos.add(*repos)
        release = audit_release_publish(release=audit_release_create(dataset=dataset))
    scanners = Scanner.objects.bulk_create(
        Scanner(name=f"board-scanner-{i:05d}", is_baseline=i % 500 == 0) for i in range(entries)
    )
    rows = []
    for i, scanner in enumerate(scanners):
        truth, tp, partial = 40, rng.randint(0, 30), rng.randint(0, 5)
        scan = 0 if i % 20 == 7 else tp + partial + rng.randint(0, 60)
        tp, partial = (0, 0) if scan == 0 else (tp, partial)
        precision = tp / scan if scan else None
        recall = tp / truth
        f1 = 2 * precision * recall / (precision + recall) if precision and recall else None
        with_partial = (
            min(1.0, (f1 or 0.0) + partial / (2 * truth + scan)) if f1 is not None else None
        )
        complete = i % 10 != 3
        rows.append(
            AuditBoardRow(
                release=release,
                judge="offline",
                scanner=scanner,
                repos_evaluated=len(repos) if complete else 1,
                repos_total=len(repos),
                is_complete=complete,
                run_ids=[i + 1],
                metrics={
                    "truth": truth,
                    "scan": scan,
                    "tp": tp,
                    "partial": partial,
                    "fp": scan - tp - partial,
                    "fn": truth - tp,
                    "precision": precision,
                    "recall": recall,
                    "f1": f1,
                    "f1_with_partial": with_partial,
                    "method_name": f"method {i}" if i % 3 == 0 else "",
                },
                f1_with_partial=with_partial,
                ci_low=None if with_partial is None else max(0.0, with_partial - 0.05),
                ci_high=None if with_partial is None else min(1.0, with_partial + 0.05),
            )
        )
    # The board's order columns and ties, as a rebuild writes them.
    for row, scanner in zip(rows, scanners, strict=True):
        row.f1 = row.metrics.get("f1")
        for name, number in audit_metric_columns(row.metrics).items():
            setattr(row, name, number)
        for name, value in audit_board_sort_fields(
            scanner_name=scanner.name,
            is_complete=row.is_complete,
            repos_evaluated=row.repos_evaluated,
            f1_with_partial=row.f1_with_partial,
            f1=row.f1,
            ci_low=row.ci_low,
            ci_high=row.ci_high,
        ).items():
            setattr(row, name, value)
    ties_all(AUDIT_SHAPE, rows)
    AuditBoardRow.objects.bulk_create(rows, batch_size=2_000)
    return release


def measure(client: Client, query: str, requests: int = REQUESTS) -> dict[str, Any]:
    """p50/p95/max ms of ``requests`` GETs of ``URL + query`` and the queries of one."""
    timed = time_gets(client, [URL + query] * requests, warmup=WARMUP)
    first = timed.pop("first").json()
    return {
        **timed,
        "queries": timed["queries"][0],
        "rows": len(first["results"]),
        "count": first["count"],
    }


CASES = (
    ("default order, page 1", f"?page_size={PAGE_SIZE}"),
    ("?ordering=-tp, page 1", f"?page_size={PAGE_SIZE}&ordering=-tp"),
    ("?ordering=scanner, page 1", f"?page_size={PAGE_SIZE}&ordering=scanner"),
    ("default order, page 20", f"?page_size={PAGE_SIZE}&page=20"),
)


def run(out: TextIO, *, sizes: tuple[int, ...] = SIZES, requests: int = REQUESTS) -> None:
    from django.conf import settings

    rates = {"anon": "100000000/min", "user": "100000000/min"}
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    warnings.filterwarnings("ignore", message="No directory at", module="django.core.handlers")
    hosts = [*settings.ALLOWED_HOSTS, "testserver"]
    production_like = override_settings(DEBUG=False, REST_FRAMEWORK=rest, ALLOWED_HOSTS=hosts)
    with production_like, _scratch_database():
        out.write(
            f"db: {connection.vendor}; {requests} sequential requests per case after {WARMUP} "
            f"warm-up, Django test client (whole middleware and DRF stack, no sockets)\n"
        )
        out.write(
            f"{'scanners':>9}  {'case':<28}{'rows':>5}{'queries':>8}{'p50 ms':>8}{'p95 ms':>8}"
            f"{'max ms':>8}  vs anchor p50 / p95\n"
        )
        seeded = 0
        queries: set[int] = set()
        worst_p95: dict[int, float] = {}
        for size in sizes:
            from benchmarks_app.models import Scanner
            from benchmarks_app.models.audit import AuditBoardRow

            # Each size is a fresh board of exactly ``size`` rows.
            AuditBoardRow.objects.all().delete()
            Scanner.objects.all().delete()
            started = time.perf_counter()
            seed_audit_board(size)
            seeded_s = time.perf_counter() - started
            seeded = size
            gc.collect()
            gc.freeze()  # the seeding's objects are never collected again: no long pauses
            client = Client()
            out.write(f"{'':>9}  (seeded {seeded:,} rows in {seeded_s:.1f}s)\n")
            for label, query in CASES:
                m = measure(client, query, requests)
                queries.add(m["queries"])
                worst_p95[size] = max(worst_p95.get(size, 0.0), m["p95"])
                anchor_p50, anchor_p95 = ANCHOR_MS.get(size, (None, None))
                ratio = (
                    f"{anchor_p50 / m['p50']:.0f}x / "
                    + (f"{anchor_p95 / m['p95']:.0f}x" if anchor_p95 else "-")
                    + " faster"
                    if anchor_p50
                    else ""
                )
                out.write(
                    f"{size:>9,}  {label:<28}{m['rows']:>5}{m['queries']:>8}{m['p50']:>8.1f}"
                    f"{m['p95']:>8.1f}{m['max']:>8.1f}  {ratio}\n"
                )
            gc.unfreeze()
        constant = "constant" if len(queries) == 1 else f"NOT constant: {sorted(queries)}"
        out.write(f"queries per request: {sorted(queries)} ({constant} across sizes and cases)\n")
        last = max(worst_p95)
        verdict = "met" if worst_p95[last] < TARGET_P95_MS else "NOT met"
        out.write(
            f"target p95 < {TARGET_P95_MS:.0f} ms at {last:,} scanners: {verdict} "
            f"(worst case {worst_p95[last]:.1f} ms)\n"
        )
