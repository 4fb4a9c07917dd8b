"""Boards at 1,000, 10,000 and 100,000 entries: reads, and what one run's end costs (issue 25).

For each size, a throw-away database (as in :mod:`benchmarks_app.bench.api`) is seeded in
bulk (``bulk_create`` in batches, never the services per entrant):

* audit: one scanner per entry on a two-repo release, a succeeded run and its repo results
  (one in ten evaluated on one repo only: incomplete), and the board's stored rows, ordered
  with their order columns and ties as a rebuild writes them. The seeded rows'
  intervals are their F1+ ± a random half-width, not bootstraps (100,000 bootstraps would be
  the 29 minutes the issue reports); the run ends measured below compute real ones;
* probes and checklist: the seeding of ``boards_probes`` and ``boards_checklist``, whose rows
  are written by the boards' full refresh (its time is printed; a run's end is incremental
  and measured below).

Then, per board: the API's first page, a sorted page, the middle page and the last page (the
places and ranks of a page's rows are counted over the board's indexes when it is read, so
the middle and last pages are the costly ones), and the web page's (templates rendered),
then the home page (each board's top rows and the run counts), ``READS`` GETs each through
the whole Django stack (test client, no sockets): p50/p95 ms and the queries of one
request. Then ``RUN_ENDS`` audit run ends (half of new scanners, half of existing ones with
new results), each a run and its results created in bulk and
``audit_board_refresh_for_run`` timed: wall and CPU ms (the database is SQLite, in process,
so CPU time includes its work; other processes sharing the machine inflate wall time, not
CPU time), queries and rows written; then as many probe run ends
(``probe_board_refresh_for_run``) and checklist run ends (``checklist_board_refresh_for_run``),
timed the same way.

The audit board's seeding is in :mod:`benchmarks_app.bench.boards_seed`, the run ends in
:mod:`benchmarks_app.bench.boards_run_ends`; this module reads the boards and reports.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import TextIO

from django.db import connection
from django.test import Client
from django.test.utils import override_settings

from benchmarks_app.bench._timing import percentile, time_gets
from benchmarks_app.bench.api import _scratch_database
from benchmarks_app.bench.boards_run_ends import (
    RUN_ENDS,
    audit_run_ends,
    checklist_run_ends,
    commit_flush_ms,
    probe_run_ends,
)
from benchmarks_app.bench.boards_seed import seed_audit

SIZES = (1_000, 10_000, 100_000)
READS = 40  # per case, after warm-up
WARMUP = 3
TARGET_READ_P95_MS = 50.0
TARGET_RUN_END_P95_MS = 100.0


def _reads(size: int) -> list[tuple[str, str, str]]:
    """(board, case, url): the API's and the page's first, sorted and last pages."""
    from django.urls import reverse

    api_last = -(-size // 50)
    page_last = -(-size // 100)
    audit_api = reverse("api:audit-leaderboard")
    probes_api = reverse("api:probes-leaderboard") + "?suite=bench-board&"
    checklist_api = reverse("api:checklist-leaderboard") + "?challenge=bench-board&"
    return [
        ("audit", "API page 1", f"{audit_api}?page_size=50"),
        ("audit", "API -tp page 2", f"{audit_api}?page_size=50&ordering=-tp&page=2"),
        ("audit", "API middle page", f"{audit_api}?page_size=50&page={api_last // 2}"),
        ("audit", "API last page", f"{audit_api}?page_size=50&page={api_last}"),
        # The largest page the API serves (a client reading a whole board page by page).
        ("audit", "API 500 rows, last", f"{audit_api}?page_size=500&page={-(-size // 500)}"),
        ("audit", "page 1", "/audit/"),
        ("audit", "page sort=-tp p2", "/audit/?sort=-tp&page=2"),
        ("audit", "page last", f"/audit/?page={page_last}"),
        ("probes", "API page 1", f"{probes_api}page_size=50"),
        ("probes", "API -pass_rate p2", f"{probes_api}page_size=50&ordering=-pass_rate&page=2"),
        ("probes", "API middle page", f"{probes_api}page_size=50&page={api_last // 2}"),
        ("probes", "API last page", f"{probes_api}page_size=50&page={api_last}"),
        ("probes", "page 1", "/probes/"),
        ("probes", "page sort p2", "/probes/?bench-board-sort=pass_rate&bench-board-page=2"),
        ("probes", "page last", f"/probes/?bench-board-page={page_last}"),
        ("checklist", "API page 1", f"{checklist_api}page_size=50"),
        ("checklist", "API -c_g page 2", f"{checklist_api}page_size=50&ordering=-c_g&page=2"),
        ("checklist", "API middle page", f"{checklist_api}page_size=50&page={api_last // 2}"),
        ("checklist", "API last page", f"{checklist_api}page_size=50&page={api_last}"),
        ("checklist", "page 1", "/checklist/?challenge=bench-board"),
        ("checklist", "page sort p2", "/checklist/?challenge=bench-board&sort=-c_g&page=2"),
        ("checklist", "page last", f"/checklist/?challenge=bench-board&page={page_last}"),
        # The landing page: every board's top rows and the run counts (a run per entry).
        ("all", "home page /", "/"),
    ]


def _ms(values: list[float]) -> str:
    return f"{percentile(values, 50):>8.1f}{percentile(values, 95):>8.1f}{max(values):>8.1f}"


def run(out: TextIO, *, sizes: tuple[int, ...] = SIZES, reads: int = READS) -> None:
    from django.conf import settings

    from benchmarks_app.bench import boards_checklist, boards_probes

    rates = {"anon": "1000000000/min", "user": "1000000000/min"}
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    hosts = [*settings.ALLOWED_HOSTS, "testserver"]
    out.write(
        f"db: {connection.vendor}; per size a fresh database seeded in bulk; {reads} GETs per "
        f"read case after {WARMUP} warm-up (test client: middleware, DRF, templates; no "
        f"sockets, anonymous); {RUN_ENDS} audit, {RUN_ENDS} probe and {RUN_ENDS} checklist run "
        "ends (new entrant / re-run alternating)\n"
    )
    summary = []
    for size in sizes:
        with (
            override_settings(DEBUG=False, ALLOWED_HOSTS=hosts, REST_FRAMEWORK=rest),
            _scratch_database(),
        ):
            started, cpu = time.perf_counter(), time.process_time()
            release = seed_audit(size)
            audit_s = time.perf_counter() - started
            _, probes_refresh_s = boards_probes.seed(size)
            checklist_refresh_s = boards_checklist.seed(size)
            out.write(
                f"\n{size:,} entries per board: seeded in {time.perf_counter() - started:.1f}s "
                f"wall, {time.process_time() - cpu:.1f}s CPU (audit {audit_s:.1f}s; the probe "
                f"board's full refresh {probes_refresh_s:.2f}s, the checklist board's "
                f"{checklist_refresh_s:.2f}s)\n"
            )
            if connection.vendor == "postgresql":
                # What autovacuum does within a minute of a bulk load: without statistics
                # and visibility maps PostgreSQL picked the wrong indexes (4 s a page).
                with connection.cursor() as cursor:
                    cursor.execute("VACUUM ANALYZE")
                out.write("  (PostgreSQL: VACUUM ANALYZE after seeding, as autovacuum would)\n")
            gc.collect()
            gc.freeze()
            try:
                client = Client()
                out.write(
                    f"  {'board':<10}{'read':<20}{'queries':>8}{'p50 ms':>8}{'p95 ms':>8}"
                    f"{'max ms':>8}{'CPU p50':>8}{'CPU p95':>8}\n"
                )
                worst, worst_cpu, worst_case = 0.0, 0.0, ""
                largest = ""
                for board, case, url in _reads(size):
                    m = time_gets(
                        client,
                        [url] * reads,
                        warmup=WARMUP,
                        headers={"Accept": "application/json"} if "/api/" in url else None,
                    )
                    if "page_size=500" in url:
                        # Ten times the rows of a default page: outside the target, which
                        # is for the pages users land on (50 rows by the API, 100 a page).
                        largest = f"p95 {m['p95']:.1f} ms ({board} {case})"
                    elif m["p95"] > worst:
                        worst, worst_case = m["p95"], f"{board} {case}"
                    if "page_size=500" not in url:
                        worst_cpu = max(worst_cpu, m["cpu_p95"])
                    out.write(
                        f"  {board:<10}{case:<20}{'/'.join(map(str, m['queries'])):>8}"
                        f"{m['p50']:>8.1f}{m['p95']:>8.1f}{m['max']:>8.1f}"
                        f"{m['cpu_p50']:>8.1f}{m['cpu_p95']:>8.1f}\n"
                    )
                ends = audit_run_ends(release, RUN_ENDS)
                probe_ends = probe_run_ends(RUN_ENDS)
                checklist_ends = checklist_run_ends(RUN_ENDS)
            finally:
                gc.unfreeze()
            out.write(
                f"  audit run end (audit_board_refresh_for_run): {'p50':>8}{'p95':>8}{'max':>8}\n"
            )
            out.write(f"  {'wall ms':<45}{_ms([e['wall'] for e in ends])}\n")
            out.write(f"  {'CPU ms':<45}{_ms([e['cpu'] for e in ends])}\n")
            for kind in ("new", "rerun"):
                mine = [e for e in ends if e["kind"] == kind]
                out.write(
                    f"  {kind:<6} wall ms {statistics.median(e['wall'] for e in mine):.1f}, "
                    f"CPU ms {statistics.median(e['cpu'] for e in mine):.1f}, queries "
                    f"{sorted({e['queries'] for e in mine})}, rows written "
                    f"{[e['written'] for e in mine]}\n"
                )
            out.write(
                f"  probe run end (probe_board_refresh_for_run): wall ms "
                f"{_ms([e['wall'] for e in probe_ends])}, CPU ms "
                f"{_ms([e['cpu'] for e in probe_ends])} (p50 p95 max), queries "
                f"{sorted({e['queries'] for e in probe_ends})}\n"
            )
            out.write(
                f"  checklist run end (checklist_board_refresh_for_run): wall ms "
                f"{_ms([e['wall'] for e in checklist_ends])}, CPU ms "
                f"{_ms([e['cpu'] for e in checklist_ends])} (p50 p95 max), queries "
                f"{sorted({e['queries'] for e in checklist_ends})}, rows written "
                f"{[e['result'] for e in checklist_ends]}\n"
            )
            if connection.vendor == "postgresql":
                flush = commit_flush_ms(release)
                out.write(
                    f"  a commit's WAL flush on this machine (a one-row update in its own "
                    f"transaction, as a run end commits once): {_ms(flush)} ms (p50 p95 max), "
                    "inside every run end's wall time above\n"
                )
            summary.append(
                (
                    size,
                    f"{worst:.1f} ms wall ({worst_case}), {worst_cpu:.1f} ms CPU",
                    largest,
                    worst,
                    {
                        "audit": percentile([e["wall"] for e in ends], 95),
                        "probes": percentile([e["wall"] for e in probe_ends], 95),
                        "checklist": percentile([e["wall"] for e in checklist_ends], 95),
                    },
                )
            )
    out.write(
        "\nsummary (targets: reads of a default page, 50 rows by the API and 100 on a page, "
        "p95 < 50 ms; a run end p95 < 100 ms at 100,000)\n"
    )
    for size, read_text, largest_text, read_p95, ends_p95 in summary:
        out.write(
            f"  {size:>8,} entries: worst read p95 {read_text} "
            f"({'met' if read_p95 < TARGET_READ_P95_MS else 'NOT met'}); run end p95 wall "
            + ", ".join(
                f"{board} {p95:.1f} ms ({'met' if p95 < TARGET_RUN_END_P95_MS else 'NOT met'})"
                for board, p95 in ends_p95.items()
            )
            + f"; the largest API page (500 rows, no target): {largest_text}\n"
        )
