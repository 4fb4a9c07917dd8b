"""The three web board pages read one page of stored rows: latency and queries (issue 14).

Before, ``/audit/``, ``/probes/`` and ``/checklist/`` built every entry and sorted and paged
it in Python (``views.tables.SortableTable``); now each table is a count and one ``LIMIT``
query on the board's stored rows (``views.board_tables.BoardTable``), sorted in SQL.

In a throw-away database (the project's is untouched), ``seed_leaderboards`` writes 1,000
and then 10,000 entries on each board; then ``REQUESTS`` GETs per case go through the whole
Django stack with the test client (templates rendered): the first page in the board's order,
a page sorted by a column, and the last page. Printed: p50/p95 ms and the queries of one
request, which must be the same at both sizes.
"""

from __future__ import annotations

import gc
import time
import warnings
from typing import Any, TextIO

from django.db import connection
from django.test import Client
from django.test.utils import override_settings

from benchmarks_app.bench._timing import time_gets
from benchmarks_app.bench.api import _scratch_database, seed_leaderboards

SIZES = (1_000, 10_000)
REQUESTS = 60
WARMUP = 5
PAGE_SIZE = 100  # views.board_tables.PAGE_SIZE

# (board, page, its table's query prefix, a column to sort by)
PAGES = (
    ("audit", "/audit/", "", "-tp"),
    ("probes", "/probes/", "bench-suite-", "pass_rate"),
    ("checklist", "/checklist/?challenge=bench", "", "-c_g"),
)


def _join(url: str, params: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{params}"


def measure(client: Client, url: str, requests: int = REQUESTS) -> dict[str, Any]:
    """p50/p95 ms of ``requests`` GETs of ``url`` and the queries of one."""
    timed = time_gets(client, [url] * requests, warmup=WARMUP)
    first = timed.pop("first")
    return {**timed, "queries": timed["queries"][0], "bytes": len(first.content)}


def _cases(size: int) -> list[tuple[str, str, str]]:
    last = -(-size // PAGE_SIZE)
    cases = []
    for board, url, prefix, sort in PAGES:
        cases.append((board, "page 1, board order", url))
        cases.append(
            (board, f"page 2, sort={sort}", _join(url, f"{prefix}sort={sort}&{prefix}page=2"))
        )
        cases.append((board, f"page {last} (last)", _join(url, f"{prefix}page={last}")))
    return cases


def run(out: TextIO, *, sizes: tuple[int, ...] = SIZES, requests: int = REQUESTS) -> None:
    from django.conf import settings

    warnings.filterwarnings("ignore", message="No directory at", module="django.core.handlers")
    hosts = [*settings.ALLOWED_HOSTS, "testserver"]
    out.write(
        f"db: {connection.vendor}; {requests} sequential GETs per case after {WARMUP} warm-up, "
        "Django test client (middleware, views, templates; no sockets), anonymous\n"
    )
    out.write(
        f"{'entries':>8}  {'board':<10}{'case':<26}{'queries':>8}{'p50 ms':>8}{'p95 ms':>8}"
        f"{'KiB':>6}\n"
    )
    queries: dict[tuple[str, str], set[int]] = {}
    with override_settings(DEBUG=False, ALLOWED_HOSTS=hosts), _scratch_database():
        seeded = 0
        for size in sizes:
            started = time.perf_counter()
            # Boards grow in place: the second size adds entries to the first's.
            seed_leaderboards(size - seeded, start=seeded)
            seeded_s = time.perf_counter() - started
            out.write(f"{'':>8}  (seeded to {size:,} entries per board in {seeded_s:.1f}s)\n")
            seeded = size
            gc.collect()
            client = Client()
            for board, label, url in _cases(size):
                m = measure(client, url, requests)
                # The last page's label names its number: compare like with like by kind.
                kind = label.split(" ")[0] if "last" not in label else "last"
                queries.setdefault((board, kind), set()).add(m["queries"])
                out.write(
                    f"{size:>8,}  {board:<10}{label:<26}{m['queries']:>8}{m['p50']:>8.1f}"
                    f"{m['p95']:>8.1f}{m['bytes'] / 1024:>6.0f}\n"
                )
    varying = {k: sorted(v) for k, v in queries.items() if len(v) > 1}
    out.write(
        "queries per request: the same at every size for every case\n"
        if not varying
        else f"queries per request VARY with the size: {varying}\n"
    )
