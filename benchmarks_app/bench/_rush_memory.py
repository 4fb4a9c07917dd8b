"""The serving processes' memory during a rush load (:mod:`.rush`), and whether it stayed flat
after warm-up.

gunicorn's master loads the application and forks its workers, so a page of the master is
shared by every worker until one writes to it. RSS counts such a page once in each process
(the sum of RSS over master and workers counts it up to six times); PSS counts it 1/N in each
of its N processes, so the sum of PSS is the memory the site really holds, and USS (private
pages) is what a worker has made or copied for itself. All three are read from
``/proc/PID/smaps_rollup`` (RSS alone from ``/proc/PID/status`` where that cannot be read).

"Flat after warm-up" (issue 35's goal): over the last third of a load (the first two thirds
are the warm-up), no worker that served through all of it grew by more than ``flat_mib`` MiB
of RSS, from its first sample in that third to its last. A worker's memory grows to a plateau
over its first few hundred requests and stays there: its threads' allocator arenas reach the
high-water mark of the requests they served (measured in one process serving the readers'
mix on 4 threads: 88 MiB at start, 220 MiB after 600 requests, 224 MiB after 2,400, while
Python's own objects were 27 MiB). A worker started during the last third (gunicorn's
``max_requests`` replacing one) is warming up and not judged; the totals, and the slope of the
total over the last third, are printed as well. A load in which no worker served through its
last third with 3 samples or more is not judged.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO


def process_memory_mib(pid: int) -> tuple[float, float, float]:
    """(RSS, PSS, USS) of ``pid`` in MiB; PSS and USS are nan where smaps cannot be read, and
    all three 0 for a process gone."""
    try:
        fields = {}
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                fields[name] = int(value.split()[0]) / 1024
        private = fields.get("Private_Clean", 0.0) + fields.get("Private_Dirty", 0.0)
        return fields.get("Rss", 0.0), fields.get("Pss", 0.0), private
    except OSError:
        pass
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024, math.nan, math.nan
    except OSError:
        pass
    return 0.0, 0.0, 0.0


class MemorySampler(threading.Thread):
    """The memory of the processes ``pids()`` names (the first one gunicorn's master) every
    ``every_s`` seconds: per sample the seconds since the start, the totals and each
    process's (RSS, USS)."""

    def __init__(self, pids: Callable[[], list[int]], every_s: float) -> None:
        super().__init__(daemon=True)
        self.pids, self.every_s = pids, every_s
        self.samples: list[dict[str, Any]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        while not self._halt.is_set():
            pids = self.pids()
            memory = {pid: process_memory_mib(pid) for pid in pids}
            self.samples.append(
                {
                    "s": round(time.monotonic() - started, 1),
                    "rss": sum(m[0] for m in memory.values()),
                    "pss": sum(m[1] for m in memory.values()),
                    "workers": len(pids) - 1,
                    "processes": {str(pid): [m[0], m[2]] for pid, m in memory.items()},
                }
            )
            self._halt.wait(self.every_s)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) points, in MiB a minute; nan under 2 points."""
    if len(points) < 2:
        return math.nan
    mean_t = sum(t for t, _ in points) / len(points)
    mean_v = sum(v for _, v in points) / len(points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if not spread:
        return math.nan
    return 60 * sum((t - mean_t) * (v - mean_v) for t, v in points) / spread


def memory_summary(samples: list[dict[str, Any]], flat_mib: float) -> dict[str, Any]:
    """The memory figures of one load: totals at start and end, the last third's slope of the
    total, each worker's growth over the load and over the last third, whether the workers
    stayed flat there (None: nothing to judge) and how many were replaced (gunicorn's
    ``max_requests``, or one killed)."""
    if not samples:
        return {}
    measure = "pss" if not math.isnan(samples[-1]["pss"]) else "rss"
    end = samples[-1]["s"]
    last = [x for x in samples if x["s"] >= 2 * end / 3]
    slope = slope_per_min([(x["s"], x[measure]) for x in last]) if len(last) >= 3 else math.nan
    master = next(iter(samples[0]["processes"]), None)
    first_seen: dict[str, tuple[float, float]] = {}
    last_seen: dict[str, tuple[float, float]] = {}
    for sample in samples:
        for pid, (rss, uss) in sample["processes"].items():
            first_seen.setdefault(pid, (rss, uss))
            last_seen[pid] = (rss, uss)
    # Workers started before the last third and in every sample of it: their RSS there,
    # first to last (one started during it is warming up).
    before = {pid for x in samples if x["s"] < 2 * end / 3 for pid in x["processes"]}
    through = before - {master} if len(last) >= 3 else set()
    for sample in last:
        through &= set(sample["processes"])
    settled = {pid: last[-1]["processes"][pid][0] - last[0]["processes"][pid][0] for pid in through}
    workers = {
        pid: {"rss": [first_seen[pid][0], last_seen[pid][0]],
              "uss": [first_seen[pid][1], last_seen[pid][1]],
              "last_third_growth": settled.get(pid)}
        for pid in first_seen if pid != master
    }  # fmt: skip
    return {
        "measure": measure,
        "start_mib": samples[0][measure],
        "end_mib": samples[-1][measure],
        "rss_start_mib": samples[0]["rss"],
        "rss_end_mib": samples[-1]["rss"],
        "last_third_mib_per_min": slope,
        "flat_limit_mib": flat_mib,
        "largest_growth_mib": max(settled.values()) if settled else math.nan,
        "flat": None if not settled else max(settled.values()) <= flat_mib,
        "workers": workers,
        # Gone before the end (a worker that booted after the first sample is no replacement).
        "workers_replaced": len(set(first_seen) - set(samples[-1]["processes"])),
    }


def print_memory(out: TextIO, samples: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    if not samples:
        return
    step = max(1, len(samples) // 12)
    points = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    measure = summary["measure"]
    out.write(
        f"serving memory (gunicorn master + workers), {measure.upper()} MiB at s: "
        + ", ".join(f"{x[measure]:.0f}@{x['s']:.0f}" for x in points)
        + f"; RSS summed {summary['rss_start_mib']:.0f} -> {summary['rss_end_mib']:.0f} MiB "
        f"(counts pages shared with the master once per process)\n"
    )
    growth = ", ".join(
        f"{w['rss'][0]:.0f}->{w['rss'][1]:.0f} (private {w['uss'][0]:.0f}->{w['uss'][1]:.0f})"
        for w in summary["workers"].values()
    )
    out.write(f"  each worker, RSS MiB first -> last seen: {growth}; "
              f"{summary['workers_replaced']} replaced during the load\n")  # fmt: skip
    # The total's slope is in the JSON only: a worker's PSS drops each time it forks a paper
    # reader (their pages are shared until the child exits), so it swings with the uploads.
    limit = summary["flat_limit_mib"]
    if summary["flat"] is None:
        verdict = "not judged: no worker served through it"
    else:
        verdict = (
            f"largest growth of a worker serving through it {summary['largest_growth_mib']:+.0f}"
            f" MiB RSS: {'flat' if summary['flat'] else 'NOT flat'}"
        )
    out.write(f"  after warm-up (last third of the load): {verdict} "
              f"(flat: each at most {limit:+.0f} MiB)\n")  # fmt: skip
