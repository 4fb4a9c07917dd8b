"""Latency of the leaderboard endpoints with 1,000 entries each, served on loopback.

A real HTTP server (wsgiref, one thread per request) serves the project's WSGI application
on 127.0.0.1 from a throw-away database seeded with 1,000 rows per leaderboard; a client
loop then requests each leaderboard a bounded number of times over fresh TCP connections
and prints p50/p95/max latency and the response size. The project's database is untouched.
"""

from __future__ import annotations

import http.client
import random
import statistics
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any, TextIO
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.db import connection
from django.test.utils import override_settings
from django.urls import NoReverseMatch, reverse

from benchmarks_app.bench._timing import succeeded_runs

ENTRIES = 1_000
REQUESTS = 150  # per endpoint, after warm-up
WARMUP = 5
TIME_CAP_S = 60.0  # per endpoint: the loop stops early rather than run for ever


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _scratch_database() -> Iterator[None]:
    """A fresh, migrated database for the run (a temporary file for SQLite)."""
    settings_dict = connection.settings_dict
    old_name = settings_dict["NAME"]
    tmpdir = tempfile.TemporaryDirectory(prefix="bench-api-")
    if connection.vendor == "sqlite":
        # A file rather than memory: the server threads open their own connections.
        settings_dict.setdefault("TEST", {})["NAME"] = str(Path(tmpdir.name) / "bench.sqlite3")
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        tmpdir.cleanup()


@contextmanager
def _server() -> Iterator[tuple[str, int]]:
    from django.core.wsgi import get_wsgi_application

    httpd = make_server(
        "127.0.0.1", 0, get_wsgi_application(), _ThreadingServer, handler_class=_QuietHandler
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield str(httpd.server_address[0]), int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()


def seed_leaderboards(entries: int, start: int = 0) -> None:
    """``entries`` scored rows in each leaderboard, written in bulk (some scores missing).

    ``start`` numbers the entries, so that calling it again adds rows (tests use two sizes).
    """
    from benchmarks_app.models import (
        AuditDataset,
        AuditRepoResult,
        Benchmark,
        Challenge,
        ChecklistScore,
        ChecklistSubmission,
        EvaluationRun,
        ProbeRunReport,
        ProbeSuite,
        Repo,
        ResponseSubmission,
        RunStatus,
        Scanner,
        SubmissionKind,
        SubmissionStatus,
        Team,
    )
    from benchmarks_app.services.audit import (
        audit_board_refresh,
        audit_release_create,
        audit_release_publish,
    )
    from benchmarks_app.services.checklist.boards import checklist_board_refresh
    from benchmarks_app.services.probes.boards import probe_board_refresh

    rng = random.Random(7 + start)
    numbers = range(start, start + entries)
    # Audit: one scanner per entry, each scored on one repo, the whole of a one-repo dataset
    # release (its board is rewritten below, as when runs end).
    repo, _ = Repo.objects.get_or_create(project_id="bench_repo_2025_01", name="Bench repo")
    dataset, _ = AuditDataset.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    release = dataset.releases.filter(is_published=True).first()
    if release is None:
        dataset.repos.add(repo)
        release = audit_release_publish(release=audit_release_create(dataset=dataset))
    scanners = Scanner.objects.bulk_create(Scanner(name=f"scanner-{i:04d}") for i in numbers)
    audit_runs = EvaluationRun.objects.bulk_create(
        EvaluationRun(
            benchmark=Benchmark.AUDIT,
            status=RunStatus.SUCCEEDED,
            is_complete=True,
            progress_done=1,
            progress_total=1,
            scanner=scanner,
            release=release,
            judge="offline",
        )
        for scanner in scanners
    )
    results = []
    for run, scanner in zip(audit_runs, scanners, strict=True):
        truth, tp, partial = 20, rng.randint(0, 15), rng.randint(0, 3)
        scan = tp + partial + rng.randint(0, 30)
        results.append(
            AuditRepoResult(
                run=run,
                repo=repo,
                scanner=scanner,
                is_complete=True,
                metrics={
                    "repo": repo.project_id,
                    "truth": truth,
                    "scan": scan,
                    "qa": 0,
                    "tp": tp,
                    "partial": partial,
                    "fp": scan - tp - partial,
                    "fn": truth - tp,
                    "truth_severity_counts": {},
                    "scan_severity_counts": {},
                },
            )
        )
    AuditRepoResult.objects.bulk_create(results)
    audit_board_refresh(release=release, judge="offline")

    # Probes: one model per entry on one suite; one in ten has no resilience index.
    suite, _ = ProbeSuite.objects.get_or_create(name="bench-suite")
    submissions = ResponseSubmission.objects.bulk_create(
        ResponseSubmission(suite=suite, model_name=f"model-{i:04d}") for i in numbers
    )
    probe_runs = succeeded_runs(Benchmark.PROBES, probe_submission=submissions)
    ProbeRunReport.objects.bulk_create(
        ProbeRunReport(
            run=run,
            submission=sub,
            metrics={"counts": {"evaluated": 40}},
            resilience_index=None if i % 10 == 3 else rng.random(),
            pass_rate=rng.random(),
            severity_weighted_pass_rate=rng.random(),
            high_stakes_failure_rate=rng.random(),
        )
        for i, run, sub in zip(numbers, probe_runs, submissions, strict=True)
    )
    probe_board_refresh(suite=suite)

    # Checklist: one team per entry, each with one scored triplet.
    challenge, _ = Challenge.objects.get_or_create(name="Bench challenge", slug="bench")
    teams = Team.objects.bulk_create(
        Team(challenge=challenge, name=f"team-{i:04d}") for i in numbers
    )
    checklist_subs = ChecklistSubmission.objects.bulk_create(
        ChecklistSubmission(
            challenge=challenge,
            team=team,
            kind=SubmissionKind.TRIPLET,
            status=SubmissionStatus.SCORED,
        )
        for team in teams
    )
    checklist_runs = succeeded_runs(Benchmark.CHECKLIST, checklist_submission=checklist_subs)
    scores = []
    for run, sub in zip(checklist_runs, checklist_subs, strict=True):
        c_g, c_a, c_t = rng.random(), rng.random(), rng.random()
        r = (c_a + c_t) / 2
        scores.append(
            ChecklistScore(run=run, submission=sub, c_g=c_g, c_a=c_a, c_t=c_t, r=r, s=c_g * r)
        )
    ChecklistScore.objects.bulk_create(scores)
    checklist_board_refresh(challenge=challenge, phase=None)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _measure(host: str, port: int, path: str) -> dict[str, Any]:
    def get() -> tuple[int, int]:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            conn.request("GET", path, headers={"Accept": "application/json"})
            response = conn.getresponse()
            body = response.read()
            return response.status, len(body)
        finally:
            conn.close()

    for _ in range(WARMUP):
        get()
    latencies: list[float] = []
    status, size = 0, 0
    deadline = time.perf_counter() + TIME_CAP_S
    while len(latencies) < REQUESTS and time.perf_counter() < deadline:
        started = time.perf_counter()
        status, size = get()
        latencies.append((time.perf_counter() - started) * 1000)
        if status != 200:
            break
    return {
        "status": status,
        "bytes": size,
        "n": len(latencies),
        "p50": _percentile(latencies, 50),
        "p95": _percentile(latencies, 95),
        "max": max(latencies),
        "mean": statistics.fmean(latencies),
    }


def _endpoints() -> list[tuple[str, str | None]]:
    """Each leaderboard's first page (what a client sees), then a 500-row page."""
    paths: list[tuple[str, str | None]] = []
    for query in ("", "?page_size=500"):
        for bench in ("audit", "probes", "checklist"):
            try:
                paths.append((f"{bench}{query}", reverse(f"api:{bench}-leaderboard") + query))
            except NoReverseMatch:
                paths.append((bench, None))
    return paths


def run(out: TextIO, *, entries: int = ENTRIES) -> None:
    rates = {"anon": "1000000/min", "user": "1000000/min"}
    from django.conf import settings

    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    # Production-like: no query log (DEBUG), throttling still on (its cache round trips count).
    # WhiteNoise warns that STATIC_ROOT was never collected: irrelevant to JSON endpoints.
    warnings.filterwarnings("ignore", message="No directory at", module="django.core.handlers")
    with override_settings(DEBUG=False, REST_FRAMEWORK=rest), _scratch_database():
        started = time.perf_counter()
        seed_leaderboards(entries)
        out.write(
            f"seeded {entries:,} entries per leaderboard in {time.perf_counter() - started:.1f}s\n"
        )
        with _server() as (host, port):
            out.write(
                f"server: wsgiref (thread per request) on http://{host}:{port}/, "
                f"db: {connection.vendor}; {REQUESTS} sequential requests per endpoint "
                f"after {WARMUP} warm-up, a new TCP connection each\n"
            )
            columns = (
                ("status", 7),
                ("KB", 7),
                ("n", 5),
                ("p50 ms", 9),
                ("p95 ms", 9),
                ("max ms", 9),
            )
            out.write(f"{'endpoint':<44}" + "".join(f"{c:>{w}}" for c, w in columns) + "\n")
            p95s = {}
            for bench, path in _endpoints():
                if path is None:
                    out.write(
                        f"{bench + ' leaderboard':<44} not available "
                        f"(no api:{bench}-leaderboard route)\n"
                    )
                    continue
                m = _measure(host, port, path)
                p95s[bench] = m["p95"]
                out.write(
                    f"{path:<44}{m['status']:>7}{m['bytes'] / 1024:>7.0f}{m['n']:>5}"
                    f"{m['p50']:>9.1f}{m['p95']:>9.1f}{m['max']:>9.1f}\n"
                )
            if len(p95s) > 1:
                fastest = min(p95s.values())
                ratios = ", ".join(f"{b} {v / fastest:.1f}x" for b, v in p95s.items())
                out.write(f"p95 relative to the fastest leaderboard: {ratios}\n")
