"""The chaos scenarios of issue 16, run by the driver of :mod:`benchmarks_app.bench.cluster`.

``python -m benchmarks_app.bench.cluster --scenario kill --db sqlite --json`` (or
:func:`~benchmarks_app.bench.cluster.drive`) runs one against real ``qcluster`` processes and a
database of its own and prints its figures; ``test_chaos`` asserts on them.

Each scenario first processes twin runs (same findings under a ``~ref`` scanner) in the driver
process, uninterrupted, for reference verdicts; then it empties the verdict cache and the
judge's counts, so that the runs under test pay for every question. After its damage it only
watches the database: nobody resumes, sweeps or cancels anything.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from benchmarks_app.bench.cluster import ROOT, Cluster, Harness
from benchmarks_app.bench.cluster_data import cold_cache, create_runs, seed, wait_end

Verdicts = dict[str, list[Any]]

# Options and settings of each scenario, unless given on the command line.
DEFAULTS: dict[str, dict[str, Any]] = {
    # One repo whose chain of judge rounds is longer than Q_TIMEOUT (10 s): 14 truth findings
    # take about 8 rounds (a truth follows the one before it a batch behind), 2 s each.
    "timeout": {
        "latency": 2.0,
        "truths": 14,
        "findings": 8,
        "settings": {"Q_TIMEOUT": "10", "Q_RETRY": "20"},
    },
    "outage": {"runs": 2, "repos": 3, "settings": {"JUDGE_OUTAGE_PATIENCE_S": "10"}},
    "identical": {"repos": 3},
    # Chains of 12 rounds of 1 s: the victim is still mid-run when the survivor is up.
    "sigterm": {"runs": 2, "repos": 3, "latency": 1.0, "truths": 12},
    # Redis unreachable for --outage-s (30 s) while two runs are under way.
    "redis_blip": {"runs": 2, "repos": 3},
    "wrong_key": {"runs": 2, "repos": 3},
    # 2 clusters x 2 workers with a pool of 2 per process, as a role limited to their budget.
    "connection_budget": {
        "runs": 2,
        "repos": 6,
        "settings": {"DATABASE_POOL": "1", "DATABASE_POOL_SIZE": "2", "Q_CLUSTERS": "2"},
    },
}


def wait_for(condition: Callable[[], bool], timeout_s: float = 120) -> bool:
    until = time.monotonic() + timeout_s
    while time.monotonic() < until:
        if condition():
            return True
        time.sleep(0.25)
    return False


def verdicts(run_id: int) -> Verdicts:
    """Per truth finding (``repo/finding id``): final outcome and matched scan index."""
    from benchmarks_app.models import AuditTruthResult

    rows = AuditTruthResult.objects.filter(run_id=run_id).exclude(outcome="judge_failed")
    fields = ("repo__project_id", "truth_finding__finding_id", "outcome", "scan_finding__index")
    return {f"{p}/{f}": [o, i] for p, f, o, i in rows.values_list(*fields)}


def references(h: Harness, scanners: Iterable[str]) -> tuple[dict[str, Verdicts], int]:
    """Verdicts of uninterrupted in-process runs on the ``~ref`` twins, and the calls they
    cost (the distinct questions); the cache is cold afterwards."""
    from benchmarks_app.models import Scanner
    from benchmarks_app.services.audit import audit_run_create
    from benchmarks_app.services.runs import run_process_all

    latency, h.judge.latency_s = h.judge.latency_s, 0.0
    out = {}
    for name in scanners:
        scanner = Scanner.objects.get(name=f"{name}~ref")
        run = audit_run_create(scanner=scanner, judge="openai", enqueue=False)
        run_process_all(run_id=run.pk)
        out[name] = verdicts(run.pk)
    calls = h.judge.answered
    cold_cache(h)
    h.judge.latency_s = latency
    return out, calls


def figures(h: Harness, runs: dict[int, str], refs: dict[str, Verdicts]) -> dict[str, Any]:
    """What every scenario reports: statuses, verdicts against the reference, duplicate result
    rows, the ledger by status and what the judge answered."""
    from django.db.models import Count, Max

    from benchmarks_app.models import AuditTruthResult, EvaluationRun, JudgeCall, RunPiece

    ids = list(runs)
    mismatches = []
    for run_id, scanner in runs.items():
        got, want = verdicts(run_id), refs[scanner]
        mismatches += [
            {"run": run_id, "truth": k, "got": got.get(k), "want": want.get(k)}
            for k in sorted(set(got) | set(want))
            if got.get(k) != want.get(k)
        ]
    calls = JudgeCall.objects.filter(run_id__in=ids).values_list("status")
    final = AuditTruthResult.objects.filter(run_id__in=ids).exclude(outcome="judge_failed")
    pieces = RunPiece.objects.filter(run_id__in=ids)
    runs_qs = EvaluationRun.objects.filter(pk__in=ids)
    return {
        "db": h.db,
        "lease_s": h.lease_s,
        "statuses": dict(runs_qs.values_list("pk", "status")),
        "errors": [e for e in runs_qs.values_list("error", flat=True) if e],
        "truth_findings": sum(len(refs[s]) for s in runs.values()),
        "verdicts_identical": not mismatches and all(refs[s] for s in runs.values()),
        "mismatches": mismatches[:10],
        "duplicate_results": final.values("run_id", "truth_finding_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count(),
        "judge_answered": h.judge.answered,
        "judge_refused": h.judge.refused,
        "ledger": dict(calls.annotate(n=Count("id")).values_list("status", "n")),
        "max_piece_attempt": pieces.aggregate(m=Max("attempt"))["m"],
        "piece_errors": sorted({e for e in pieces.values_list("error", flat=True) if e})[:10],
        "clusters_alive": [c.proc.poll() is None for c in h.clusters],
        "cluster_warnings": [line for c in h.clusters for line in c.warnings(8)],
    }


def holders(cluster: Cluster, run_ids: list[int]) -> list[int]:
    """Pieces that ``cluster``'s workers hold (a worker is ``host:<sentinel pid>/<pid>``)."""
    from benchmarks_app.models import RunPiece

    pids = {str(p) for p in cluster.pids(max_age_s=2)}
    held = RunPiece.objects.filter(run_id__in=run_ids, status="running")
    return [pk for pk, w in held.values_list("pk", "worker") if _sentinel(w) in pids]


def _calls(piece_ids: list[int], status: str) -> int:
    """Ledger rows with ``status`` of the current attempts (leases) of these pieces."""
    from benchmarks_app.models import JudgeCall, RunPiece

    pieces = RunPiece.objects.filter(pk__in=piece_ids).values_list("pk", "attempt")
    return JudgeCall.objects.filter(
        holder__in=[f"{pk}:{n}" for pk, n in pieces], status=status
    ).count()


def _mid_run(piece_ids: list[int]) -> bool:
    """Past their first answers (a new client's first request leaves slowly), calls out."""
    return _calls(piece_ids, "ok") >= 4 and _calls(piece_ids, "pending") > 0


def _sentinel(worker: str) -> str:
    return worker.rsplit(":", 1)[-1].split("/")[0]


def _prepare(h: Harness, a: argparse.Namespace, variants: dict[str, str]) -> dict[str, Verdicts]:
    seed(variants, repos=a.repos, truths=a.truths, findings=a.findings)
    refs, _ = references(h, variants)
    return refs


def scenario_kill(h: Harness, a: argparse.Namespace) -> dict[str, Any]:
    """``kill -9`` of one cluster's whole process group once both clusters hold pieces."""
    from benchmarks_app.models import JudgeCall, RunPiece
    from benchmarks_app.services.sweeper import waiting_task_ids

    names = [f"s{i}" for i in range(a.runs)]
    refs = _prepare(h, a, {n: n for n in names})
    # The victim starts alone and the survivor once it holds pieces: started together, the
    # survivor (its workers up first on a loaded machine) took every piece in two clean-clone
    # CI runs, and the runs ended before the victim held two.
    # The judge answers slowly until the kill: with its usual latency, a clean-clone CI run's
    # victim finished every piece it took before it was seen holding two, and nothing was
    # killed mid-run (a machine still busy with the llama-server build).
    latency_s, h.judge.latency_s = h.judge.latency_s, max(h.judge.latency_s, 1.0)
    (victim,) = h.start(1)
    ids = create_runs(names)
    victim_held = wait_for(lambda: len(holders(victim, ids)) >= 2)
    (survivor,) = h.start(1)
    both = victim_held and bool(holders(survivor, ids))
    # Mid-run: the victim's workers have judge calls in flight.
    mid_run = wait_for(lambda: _mid_run(holders(victim, ids)), timeout_s=60)
    # Queued pieces whose task is no longer in the broker sit in a cluster's local queue.
    waiting = waiting_task_ids() or set()
    prefetched = (
        RunPiece.objects.filter(run_id__in=ids, status="queued").exclude(task_id__in=waiting)
    ).count()
    held = holders(victim, ids)
    in_flight, at_judge = _calls(held, "pending"), h.judge.in_flight
    victim.signal(signal.SIGKILL)
    victim.proc.wait()
    h.judge.latency_s = latency_s
    pending = JudgeCall.objects.filter(run_id__in=ids, status="pending").count()
    elapsed = wait_end(ids, h.lease_s + a.patience_s)
    return {
        **figures(h, dict(zip(ids, names, strict=True)), refs),
        "killed_holding": len(held),
        "both_held_before_kill": both,
        "mid_run_at_kill": mid_run,
        "prefetched_at_kill": prefetched,
        "in_flight_before_kill": in_flight,
        "judge_in_flight_at_kill": at_judge,
        "pending_calls_after_kill": pending,
        "in_flight_bound": int(h.env["JUDGE_CONCURRENCY"]) * int(h.env["Q_WORKERS"]),
        "elapsed_after_kill_s": elapsed,
        "expected_s": h.lease_s + 90,
        "survivor_alive": survivor.proc.poll() is None,
    }


def scenario_outage(h: Harness, a: argparse.Namespace) -> dict[str, Any]:
    """The judge down for ``--outage-s`` seconds once the runs have made progress."""
    from benchmarks_app.models import AuditTruthResult, EvaluationRun, RunPiece

    names = [f"s{i}" for i in range(a.runs)]
    refs = _prepare(h, a, {n: n for n in names})
    h.start(2)
    ids = create_runs(names)
    wait_for(lambda: AuditTruthResult.objects.filter(run_id__in=ids).count() >= 2)
    h.judge.down_for(a.outage_s, a.down_mode)
    seen: set[str] = set()

    def watch() -> None:
        seen.update(EvaluationRun.objects.filter(pk__in=ids).values_list("status", flat=True))
        pieces = RunPiece.objects.filter(run_id__in=ids).values_list("status", flat=True)
        seen.update(f"piece {s}" for s in pieces)

    elapsed = wait_end(ids, a.outage_s + h.lease_s + a.patience_s, watch)
    return {
        **figures(h, dict(zip(ids, names, strict=True)), refs),
        "outage_s": a.outage_s,
        "down_mode": a.down_mode,
        "patience_s": float(h.env.get("JUDGE_OUTAGE_PATIENCE_S", 300)),
        "paused": "waiting" in seen,
        "statuses_seen": sorted(seen),
        "elapsed_after_outage_start_s": elapsed,
    }


def scenario_timeout(h: Harness, a: argparse.Namespace) -> dict[str, Any]:
    """One repo whose piece takes longer than ``Q_TIMEOUT``: django-q2 kills its worker."""
    a.repos = 1
    refs = _prepare(h, a, {"s0": "s0"})
    h.start(1)
    ids = create_runs(["s0"])
    elapsed = wait_end(ids, h.lease_s + a.patience_s + 60)
    return {
        **figures(h, dict.fromkeys(ids, "s0"), refs),
        "q_timeout_s": int(h.env["Q_TIMEOUT"]),
        "judge_latency_s": h.judge.latency_s,
        "elapsed_s": elapsed,
    }


def scenario_identical(h: Harness, a: argparse.Namespace) -> dict[str, Any]:
    """4 scanners with identical results, one run each, all at once on 2 clusters."""
    from benchmarks_app.models import JudgeCacheEntry

    names = [f"s{i}" for i in range(4)]
    seed(dict.fromkeys(names, "same"), repos=a.repos, truths=a.truths, findings=a.findings)
    refs, distinct = references(h, names[:1])
    h.start(2)
    ids = create_runs(names)
    elapsed = wait_end(ids, h.lease_s + a.patience_s)
    return {
        **figures(h, dict.fromkeys(ids, "s0"), refs),
        "distinct_questions": distinct,
        "cache_entries": JudgeCacheEntry.objects.count(),
        "elapsed_s": elapsed,
    }


def scenario_sigterm(h: Harness, a: argparse.Namespace) -> dict[str, Any]:
    """SIGTERM to the process group of a cluster whose workers hold pieces."""
    names = [f"s{i}" for i in range(a.runs)]
    refs = _prepare(h, a, {n: n for n in names})
    # The victim starts alone and takes the pieces; the survivor joins once it holds some.
    # Started together, either cluster's first worker could claim every piece (one worker
    # drives up to RUN_PIECES_PER_PROCESS), leaving the victim idle at the signal.
    [victim] = h.start(1)
    ids = create_runs(names)
    busy = wait_for(lambda: bool(holders(victim, ids)))
    h.start(1)
    # Chains of 1 s rounds outlast the survivor's start: the victim still holds pieces now.
    busy = busy and bool(holders(victim, ids))
    processes = len(victim.pids())
    victim.signal(signal.SIGTERM)
    gone = victim.wait_gone(30)
    elapsed = wait_end(ids, h.lease_s + a.patience_s)
    return {
        **figures(h, dict(zip(ids, names, strict=True)), refs),
        "busy_at_sigterm": busy,
        "processes": processes,
        "exit_s": None if gone is None else round(gone, 2),
        "exit_code": victim.proc.poll(),
        "leftover": sorted(victim.pids()),
        "elapsed_s": elapsed,
    }


class CuttableProxy:
    """A TCP proxy in front of Redis that a scenario cuts (every connection dropped, new ones
    closed at once: what clients see of a Redis restart or a network cut) and restores."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.up = threading.Event()
        self.up.set()
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.up.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self.lock:
                self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.up.clear()
        with self.lock:
            for sock in self.open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self.open.clear()

    def restore(self) -> None:
        self.up.set()

    def close(self) -> None:
        self.cut()
        self.server.close()


def scenario_redis_blip(h: Harness, a: argparse.Namespace) -> dict[str, Any]:
    """The clusters' Redis unreachable for ``--outage-s`` once the runs have made progress:
    the clusters stay up, and the runs end by themselves (PostgreSQL + Redis only)."""
    from urllib.parse import urlparse

    from benchmarks_app.models import AuditTruthResult, JudgeCall, PairedRefresh

    if h.db != "postgres":
        return {"skipped": "needs Redis"}
    names = [f"s{i}" for i in range(a.runs)]
    refs = _prepare(h, a, {n: n for n in names})
    redis = urlparse(h.redis_url)
    proxy = CuttableProxy(redis.hostname or "127.0.0.1", redis.port or 6379)
    via_proxy = f"redis://127.0.0.1:{proxy.port}{redis.path or '/0'}"
    try:
        clusters = h.start(2, REDIS_URL=via_proxy)
        ids = create_runs(names)
        progressed = wait_for(lambda: AuditTruthResult.objects.filter(run_id__in=ids).count() >= 2)
        proxy.cut()
        time.sleep(a.outage_s)
        alive_after_blip = [c.proc.poll() is None for c in clusters]
        proxy.restore()
        elapsed = wait_end(ids, h.lease_s + a.patience_s)
        # A run that ended during the blip owes its paired marks; the sweeper sends them.
        owed = wait_for(lambda: not PairedRefresh.objects.exists(), timeout_s=150)
        return {
            **figures(h, dict(zip(ids, names, strict=True)), refs),
            "progressed_before_cut": progressed,
            "blip_s": a.outage_s,
            "alive_after_blip": alive_after_blip,
            "paired_sent": owed,
            "interrupted_calls": JudgeCall.objects.filter(
                run_id__in=ids, status="interrupted"
            ).count(),
            "elapsed_after_blip_s": elapsed,
        }
    finally:
        proxy.close()


def scenario_wrong_key(h: Harness, a: argparse.Namespace) -> dict[str, Any]:
    """``evaluate_audit`` from a shell with another SECRET_KEY beside two good clusters: it
    refuses for itself; the good clusters keep working and end the runs."""
    names = [f"s{i}" for i in range(a.runs)]
    refs = _prepare(h, a, {n: n for n in names})
    clusters = h.start(2)
    ids = create_runs(names)
    shell = subprocess.run(
        [sys.executable, "manage.py", "evaluate_audit", "--scanner", names[0], "--judge", "openai"],
        cwd=ROOT,
        env={**h.env, "SECRET_KEY": "a-shell-with-another-key-" + "z" * 30},
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Past the clusters' next canary check (every 30 s): had the shell poisoned it, they
    # would have stopped by now.
    elapsed = wait_end(ids, h.lease_s + a.patience_s)
    time.sleep(max(0.0, 35 - (elapsed or 0)))
    return {
        **figures(h, dict(zip(ids, names, strict=True)), refs),
        "shell_exit": shell.returncode,
        "shell_said": (shell.stderr or shell.stdout).strip().splitlines()[-1:],
        "alive_after": [c.proc.poll() is None for c in clusters],
        "elapsed_s": elapsed,
    }


class ConnectionWatch(threading.Thread):
    """Samples, every 0.2 s, the role's connections (``pg_stat_activity``) and the most pieces
    one worker holds at once; keeps the peaks."""

    def __init__(self, h: Harness, role: str, run_ids: list[int]) -> None:
        super().__init__(daemon=True)
        self.h, self.role, self.run_ids = h, role, run_ids
        self.peak_connections = self.peak_pieces_per_worker = 0
        self.done = threading.Event()

    def run(self) -> None:
        import psycopg

        from benchmarks_app.models import RunPiece

        with psycopg.connect(self.h.pg_admin, autocommit=True) as conn:
            while not self.done.wait(0.2):
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", [self.role]
                ).fetchone()
                self.peak_connections = max(self.peak_connections, int(row[0]) if row else 0)
                held: dict[str, int] = {}
                running = RunPiece.objects.filter(run_id__in=self.run_ids, status="running")
                for worker in running.values_list("worker", flat=True):
                    held[worker] = held.get(worker, 0) + 1
                self.peak_pieces_per_worker = max(self.peak_pieces_per_worker, *held.values(), 0)
        from django.db import connection

        connection.close()

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=10)


def scenario_connection_budget(h: Harness, a: argparse.Namespace) -> dict[str, Any]:
    """2 clusters x 2 workers (a pool of ``DATABASE_POOL_SIZE`` per process) drive multi-repo
    runs as a PostgreSQL role whose CONNECTION LIMIT is the README's budget for them; one
    worker drives up to ``RUN_PIECES_PER_PROCESS`` pieces, which without the pool would need
    two connections each (PostgreSQL + Redis only)."""
    from urllib.parse import urlparse

    from benchmarks_app.checks import connections_needed

    if h.db != "postgres":
        return {"skipped": "needs PostgreSQL"}
    names = [f"s{i}" for i in range(a.runs)]
    refs = _prepare(h, a, {n: n for n in names})
    workers, clusters = int(h.env["Q_WORKERS"]), 2
    pieces = int(h.env.get("RUN_PIECES_PER_PROCESS", 16))
    # The budget is the pooled one even with DATABASE_POOL=0 (--set): what today's code did.
    pool = int(h.env["DATABASE_POOL_SIZE"])
    budget = connections_needed(
        clusters=clusters, workers=workers, pieces_per_process=pieces, pool_size=pool
    )
    role, password = f"{h.tag}_limited", secrets.token_hex(12)
    h._pg(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{password}' CONNECTION LIMIT {budget}")
    h.pg_after_drop.append(f'DROP ROLE IF EXISTS "{role}"')
    for what in ("TABLES", "SEQUENCES"):
        h._pg(f'GRANT ALL ON ALL {what} IN SCHEMA public TO "{role}"', own_database=True)
    url = urlparse(h.env["DATABASE_URL"])
    limited = url._replace(netloc=f"{role}:{password}@{url.hostname}:{url.port or 5432}")
    h.start(clusters, DATABASE_URL=limited.geturl())
    ids = create_runs(names)
    watch = ConnectionWatch(h, role, ids)
    watch.start()
    try:
        elapsed = wait_end(ids, h.lease_s + a.patience_s)
    finally:
        watch.stop()
    logs = "\n".join(c.log.read_text(errors="replace") for c in h.clusters)
    # PostgreSQL words the two limits apart: "too many connections for role" is the role's
    # CONNECTION LIMIT (the budget under test); "too many clients already" is the server's
    # max_connections, which every process on the server shares.
    refused = [line[:300] for line in logs.splitlines() if "too many connections" in line.lower()]
    server_full = [line[:300] for line in logs.splitlines() if "too many clients" in line.lower()]
    return {
        **figures(h, dict(zip(ids, names, strict=True)), refs),
        "pool": h.env.get("DATABASE_POOL") == "1",
        "pool_size": pool,
        "budget": budget,
        "peak_connections": watch.peak_connections,
        "peak_pieces_per_worker": watch.peak_pieces_per_worker,
        # What the same clusters would need without the pool at the pieces one worker drove.
        "unpooled_need": connections_needed(
            clusters=clusters,
            workers=workers,
            pieces_per_process=max(1, watch.peak_pieces_per_worker),
        ),
        "role_refused": refused[:10],
        "server_full": len(server_full),
        "budget_warned": "benchmarks_app.W002" in logs or "need up to" in logs,
        "elapsed_s": elapsed,
    }


SCENARIOS = {
    "connection_budget": scenario_connection_budget,
    "redis_blip": scenario_redis_blip,
    "wrong_key": scenario_wrong_key,
    "kill": scenario_kill,
    "outage": scenario_outage,
    "timeout": scenario_timeout,
    "identical": scenario_identical,
    "sigterm": scenario_sigterm,
}
