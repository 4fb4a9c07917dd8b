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
import signal
import time
from collections.abc import Callable, Iterable
from typing import Any

from benchmarks_app.bench.cluster import (
    Cluster,
    Harness,
    cold_cache,
    create_runs,
    seed,
    wait_end,
)

Verdicts = dict[str, list[Any]]

# Options and settings of each scenario, unless given on the command line.
DEFAULTS: dict[str, dict[str, Any]] = {
    # One repo whose chain of judge rounds (14 truth findings x 1 s) is longer than Q_TIMEOUT.
    "timeout": {
        "latency": 1.0,
        "truths": 14,
        "findings": 8,
        "settings": {"Q_TIMEOUT": "10", "Q_RETRY": "20"},
    },
    "outage": {"runs": 2, "repos": 3, "settings": {"JUDGE_OUTAGE_PATIENCE_S": "10"}},
    "identical": {"repos": 3},
    "sigterm": {"runs": 2, "repos": 3},
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
    victim, survivor = h.start(2)
    ids = create_runs(names)
    both = wait_for(lambda: len(holders(victim, ids)) >= 2 and bool(holders(survivor, ids)))
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
    victim, _ = h.start(2)
    ids = create_runs(names)
    busy = wait_for(lambda: bool(holders(victim, ids)))
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


SCENARIOS = {
    "kill": scenario_kill,
    "outage": scenario_outage,
    "timeout": scenario_timeout,
    "identical": scenario_identical,
    "sigterm": scenario_sigterm,
}
