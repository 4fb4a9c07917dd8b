"""Scale-out with real ``qcluster`` processes: more clusters, more workers, shorter makespans.

Two figures side by side, each against the fake judge of :mod:`benchmarks_app.bench.cluster`
(a fixed latency per call, so the work is latency-bound like a real judge's) on a database of
its own, with a cold verdict cache for every variant:

* 4 audit runs at once (synthetic data, 4 repos each) on 1 cluster vs 2 clusters of 2
  workers each: the makespans and their ratio (clusters share the load);
* one run over the 11 bundled ``baseline`` repos on 1 worker vs 4 workers, with the longest
  repo's time: a run is cut into one piece per repo, so 4 workers should bring it close to
  its longest repo rather than to the sum.

``make bench`` runs it on SQLite with the ORM broker; ``BENCH_SCALE_DB=postgres`` runs it on a
new PostgreSQL database with Redis (``CHAOS_PG_URL``, ``CHAOS_REDIS_URL``: where).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, TextIO

from benchmarks_app.bench.cluster import Harness
from benchmarks_app.bench.cluster_data import cold_cache, create_runs, seed, wait_end

DEFAULTS: dict[str, dict[str, Any]] = {
    "scale": {"latency": 0.1, "lease": 10, "runs": 4, "repos": 4, "truths": 10, "findings": 14}
}


def _makespan(h: Harness, scanners: list[str], *, clusters: int, workers: int) -> dict[str, Any]:
    """Start ``clusters`` clusters of ``workers`` workers, run ``scanners`` at once from a cold
    cache, stop the clusters: the wall time, and the longest piece."""
    from django.db.models import F, Sum

    from benchmarks_app.models import EvaluationRun, RunPiece

    cold_cache(h)
    h.start(clusters, Q_WORKERS=workers)
    started = time.monotonic()
    ids = create_runs(scanners)
    elapsed = wait_end(ids, 900)
    wall = round(time.monotonic() - started, 1)
    for cluster in h.clusters:
        cluster.stop()
    h.clusters.clear()
    # Cluster stats outlive a killed cluster by a few seconds; the next start waits for its own.
    time.sleep(4)
    pieces = RunPiece.objects.filter(run_id__in=ids)
    spans = pieces.annotate(d=F("finished_at") - F("started_at")).values_list("d", flat=True)
    longest = max((d.total_seconds() for d in spans if d is not None), default=None)
    runs = EvaluationRun.objects.filter(pk__in=ids)
    return {
        "makespan_s": wall if elapsed is not None else None,
        "statuses": sorted(set(runs.values_list("status", flat=True))),
        "pieces": pieces.count(),
        "truth_findings": runs.aggregate(n=Sum("progress_total"))["n"],
        "longest_piece_s": None if longest is None else round(longest, 1),
        "judge_calls": h.judge.answered,
    }


def _ratio(slow: dict[str, Any], fast: dict[str, Any]) -> float | None:
    if not slow["makespan_s"] or not fast["makespan_s"]:
        return None
    return round(slow["makespan_s"] / fast["makespan_s"], 2)


def scenario_scale(h: Harness, a: argparse.Namespace) -> dict[str, Any]:
    from benchmarks_app.demo import SAMPLE_DATA
    from benchmarks_app.services.audit import audit_import_path

    names = [f"s{i}" for i in range(a.runs)]
    seed({n: n for n in names}, repos=a.repos, truths=a.truths, findings=a.findings)
    one = _makespan(h, names, clusters=1, workers=2)
    two = _makespan(h, names, clusters=2, workers=2)
    audit_import_path(path=SAMPLE_DATA / "audit")
    serial = _makespan(h, ["baseline"], clusters=1, workers=1)
    wide = _makespan(h, ["baseline"], clusters=1, workers=4)
    return {
        "db": h.db,
        "judge_latency_s": h.judge.latency_s,
        "runs": {
            "count": a.runs,
            "repos_each": a.repos,
            "one_cluster": one,
            "two_clusters": two,
            "ratio": _ratio(one, two),
        },
        "big_run": {
            "repos": wide["pieces"],
            "truth_findings": wide["truth_findings"],
            "one_worker": serial,
            "four_workers": wide,
            "ratio": _ratio(serial, wide),
        },
    }


SCENARIOS = {"scale": scenario_scale}


def run(out: TextIO) -> None:
    from benchmarks_app.bench.cluster import drive

    db = os.environ.get("BENCH_SCALE_DB", "sqlite")
    r = drive("scale", db, timeout_s=1800)
    if "error" in r:
        out.write(f"scale: the driver failed:\n{r.get('error', '')}{r.get('stderr', '')}\n")
        return
    runs, big = r["runs"], r["big_run"]
    broker = "PostgreSQL + Redis" if db == "postgres" else "SQLite + ORM broker"
    out.write(
        f"scale-out: real qcluster processes, {broker}, fake judge {r['judge_latency_s']} s a "
        "call, cold verdict cache each time; makespans with fewer vs more workers\n"
    )
    out.write(f"  {'':<48} {'fewer':>10} {'more':>10} {'ratio':>7}   longest piece (more)\n")
    rows = [
        (
            f"{runs['count']} runs x {runs['repos_each']} repos, 1 vs 2 clusters",
            runs,
            "one_cluster",
            "two_clusters",
        ),
        (
            f"1 run x {big['repos']} repos ({big['truth_findings']} truths), 1 vs 4 workers",
            big,
            "one_worker",
            "four_workers",
        ),
    ]
    for label, figures, slow_key, fast_key in rows:
        slow, fast = figures[slow_key], figures[fast_key]
        ended = sorted(set(slow["statuses"]) | set(fast["statuses"]))
        note = "" if ended == ["succeeded"] else f"  (runs: {', '.join(ended)})"
        out.write(
            f"  {label:<48} {_s(slow['makespan_s']):>10} {_s(fast['makespan_s']):>10} "
            f"{_x(figures['ratio']):>7}   {_s(fast['longest_piece_s'])}{note}\n"
        )


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"
